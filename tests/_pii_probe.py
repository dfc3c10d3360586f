"""The PII probe set of issue 16: strings the scrubber must mask (with what each must become) and strings
with no PII that must come out unchanged. Phone numbers, cards and IBANs are documentation/test values
(555 numbers, test card numbers, the IBAN registry's examples); e-mails use example domains."""

PII_PROBE = [
    # phone numbers: unseparated, national and international layouts of several countries
    ("call me at 4155550100 tomorrow", "call me at [PHONE] tomorrow"),
    ("my number is 415 555 0100", "my number is [PHONE]"),
    ("Ruf mich an: 030 12345678", "Ruf mich an: [PHONE]"),
    ("Handy +49 151 23456789", "Handy [PHONE]"),
    ("Tel. (030) 1234567", "Tel. [PHONE]"),
    ("call +91 98765 43210 after 6", "call [PHONE] after 6"),
    ("mobile 098765 43210", "mobile [PHONE]"),
    ("打电话 +86 138 0013 8000", "打电话 [PHONE]"),
    ("我的手机 13800138000", "我的手机 [PHONE]"),
    ("ligue +55 11 91234-5678", "ligue [PHONE]"),
    ("fixo (11) 3456-7890", "fixo [PHONE]"),
    ("+44 7911 123456", "[PHONE]"),
    ("UK 07911 123456", "UK [PHONE]"),
    ("+33 1 42 68 53 00", "[PHONE]"),
    ("+34 612 34 56 78", "[PHONE]"),
    ("+39 06 6982 1234", "[PHONE]"),
    ("+81 3-1234-5678", "[PHONE]"),
    ("+61 2 9876 5432", "[PHONE]"),
    ("+7 (495) 123-45-67", "[PHONE]"),
    # IBANs, spaced and unspaced, with letters in the account part
    ("IBAN DE89 3704 0044 0532 0130 00 please", "IBAN [IBAN] please"),
    ("pay to GB82WEST12345698765432", "pay to [IBAN]"),
    ("FR14 2004 1010 0505 0001 3M02 606", "[IBAN]"),
    ("iban: NL91ABNA0417164300", "iban: [IBAN]"),
    ("ES9121000418450200051332", "[IBAN]"),
    # cards (Luhn-valid test numbers), 13 to 16 digits
    ("card 4222222222222 expires", "card [CARD] expires"),
    ("visa 4111-1111-1111-1111", "visa [CARD]"),
    ("amex 3782 822463 10005", "amex [CARD]"),
    ("mastercard 5555555555554444", "mastercard [CARD]"),
    # e-mails: internationalised, then obfuscated
    ("write to josé@correo.españa.es", "write to [EMAIL]"),
    ("müller@beispiel.de antwortet", "[EMAIL] antwortet"),
    ("контакт: иван@пример.рф", "контакт: [EMAIL]"),
    ("mail 用户@例子.中国", "mail [EMAIL]"),
    ("ana.lopez [at] example [dot] com", "[EMAIL]"),
    ("ana dot lopez at example dot com", "[EMAIL]"),
    ("bob(at)mail(dot)org", "[EMAIL]"),
    ("contact: jane [at] example.org", "contact: [EMAIL]"),
    # SSNs
    ("SSN 536-22-1234", "SSN [SSN]"),
    ("social security number 536 22 1234", "social security number [SSN]"),
    # IPs
    ("server 10.0.0.7 is down", "server [IP] is down"),
    ("connect to 2001:db8:85a3::8a2e:370:7334", "connect to [IP]"),
    ("link-local fe80::1%eth0", "link-local [IP]"),
    # secrets (convohub's own rules)
    ("OPENAI_API_KEY=sk-proj-abcdefghijklmnop1234", "OPENAI_API_KEY=[KEY]"),
    ("password: hunter2hunter2x9", "password: [KEY]"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[KEY]"),
]

NO_PII = [
    "In 2023 Python 3.11.7 was released", "costs $1,299.99", "epoch 1681000000000", "order #12345678",
    "ISBN 978-3-16-148410-0", "the 2019-2023 period", "pi 3.14159", "look at this dot com bubble",
    "meet at noon", "at 10:30 on 2023-04-09", "C++17 and std::vector", "version 1.2.3", "issue #4242",
    "Call of Duty 4", "temperature -12.5 C", "1 000 000 people", "the year 1984", "scores 98 87 76 65",
    "5 * 3 = 15", "x = 1e-9",
]

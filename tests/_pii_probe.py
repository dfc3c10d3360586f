"""The PII probe set of issue 16 (and the cases the scrubber passed before it): strings the scrubber must mask (with what each must become) and strings
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
    ("Mobil: +43 664 1234567", "Mobil: [PHONE]"),
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
    "order #12345678", "the 2019-2023 period", "pi 3.14159", "look at this dot com bubble",
    "meet at noon", "at 10:30 on 2023-04-09", "C++17 and std::vector", "issue #4242", "7 days a week",
    "released on 09.04.2023", "due 25-12-2024", "the 1.5.0 release", "call at 5:30 pm", "£2,499 per year",
    "Call of Duty 4", "temperature -12.5 C", "1 000 000 people", "the year 1984", "scores 98 87 76 65",
    "5 * 3 = 15", "x = 1e-9",
]

#: The regex scrubber's cases before presidio (issue 16 found what they missed): still masked exactly / left intact.
EARLIER_PII = [
    ("Mail ana.lopez@example.com now", "Mail [EMAIL] now"),
    ("write to j_smith+tag@mail.example.co.uk.", "write to [EMAIL]."),
    ("call +1 415-555-0100.", "call [PHONE]."),
    ("call (415) 555-0100 today", "call [PHONE] today"),
    ("415.555.0100", "[PHONE]"),
    ("1-800-555-0199", "[PHONE]"),
    ("+44 20 7946 0958", "[PHONE]"),
    ("+49 30 12345678", "[PHONE]"),
    ("+33 6 12 34 56 78", "[PHONE]"),
    ("+7 (495) 123-45-67", "[PHONE]"),
    ("06 12 34 56 78", "[PHONE]"),
    ("020 7946 0958", "[PHONE]"),
    ("server 192.168.1.23.", "server [IP]."),
    ("ping 8.8.8.8 again", "ping [IP] again"),
    ("fe80::1ff:fe23:4567:890a", "[IP]"),
    ("addr 2001:db8::8a2e:370:7334 ok", "addr [IP] ok"),
    ("::ffff:192.0.2.1", "[IP]"),
    ("card 4111 1111 1111 1111", "card [CARD]"),
    ("5555-5555-5555-4444", "[CARD]"),
    ("4012888888881881", "[CARD]"),
    ("https://x.io/a?api_key=abc123XYZ&x=1", "https://x.io/a?api_key=[KEY]&x=1"),
    ("u?token=eyJhbGci.xyz&access_token=zz9", "u?token=[KEY]&access_token=[KEY]"),
    ("/login?user=bob&password=hunter2", "/login?user=bob&password=[KEY]"),
    ("key sk-proj-abcdefghijklmnop1234", "key [KEY]"),
    ("hf_abcdefghijklmnopqrstuvwx", "[KEY]"),
    ("AKIAIOSFODNN7EXAMPLE", "[KEY]"),
    ("api_key: 'a1b2c3d4e5f6'", "api_key: '[KEY]'"),
]
#: Numbers and code that look like PII and are not.
EARLIER_NO_PII = [
    "In 2023 Python 3.11.7 was released", "at 2023-04-09T12:30:45Z", "2023-04-09 12:30:45", "meeting at 10:30",
    "pi is 3.14159", "costs $1,299.99", "population 1,234,567", "version 1.2.3", "v1.2.3.4.5",
    "epoch 1681000000000", "ISBN 978-3-16-148410-0", "std::vector<int> a::b", "numbers 10 20 30 40",
    "order 12345678", "the token is expired", "key=value", "score 4111111111111112", "12:30:45.123",
    "arr[1:2:3]", "ratio 16:9", "from 2019-2023", "subnet 10.0.0", "+5 points", "1+1=2", "3-5 minutes",
    "C++ and C#", "x = 100000", "between 1990 and 2005", "call 555-0100", "page 12 of 300",
]

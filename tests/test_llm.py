"""Fast tests of convohub.llm: JSON answer parsing, the response cache, endpoint retries and concurrency
against a local fake OpenAI server, the spec/env factory, and local generation with the tiny causal LM."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from convohub.llm import (
    CachedBackend,
    ChatBackend,
    ChatRequest,
    ChatResponse,
    EndpointBackend,
    Parsed,
    ResponseCache,
    TransformersBackend,
    ask_until_parsed,
    backend_from_env,
    cache_key,
    few_shot_messages,
    make_backend,
    parse_json_answer,
    response_summary,
    run_chat,
)
from convohub.llm import cache as cache_module

FAST_BACKOFF = (0.01, 0.05)

# --------------------------------------------------------------------------------------- JSON answers

POSITIVES: list[tuple[str, Any, Any]] = [
    ('{"label": "yes", "score": 4}', None, {"label": "yes", "score": 4}),
    ("  [1, 2, 3]\n", None, [1, 2, 3]),
    ('```json\n{"a": 1}\n```', None, {"a": 1}),
    ('Sure! Here you go:\n```JSON\n{"a": [1, 2]}\n```\nHope that helps.', None, {"a": [1, 2]}),
    ('```\n{"a": 1}\n```', None, {"a": 1}),
    ('The answer is {"verdict": "A"} because A is better.', None, {"verdict": "A"}),
    (
        'Reasoning first... final: {"verdict": "B", "why": "shorter"}',
        dict,
        {"verdict": "B", "why": "shorter"},
    ),
    ('{"a": 1, "b": [1, 2,],}', None, {"a": 1, "b": [1, 2]}),
    ('{"s": "keep , } ] inside strings"}', None, {"s": "keep , } ] inside strings"}),
    ('{"a": 1} and then {"b": 2}', None, {"a": 1}),
    ('[0.5] then {"score": 3}', dict, {"score": 3}),
    ('{not json} but this is: {"ok": true}', None, {"ok": True}),
    ("{'label': 'no', 'ok': true, 'n': null}", None, {"label": "no", "ok": True, "n": None}),
    ('Here\'s my answer: {"text": "don\'t stop"}', None, {"text": "don't stop"}),
    ('<think>maybe {"x": 0}? no.</think>\n{"x": 1}', None, {"x": 1}),
    ('{"nested": {"deep": [{"k": "v"}]}}', dict, {"nested": {"deep": [{"k": "v"}]}}),
    ('\ufeff{"bom": 1}', None, {"bom": 1}),
    ("42", None, 42),
    ("3", float, 3),
    ('["a", "b"]', list, ["a", "b"]),
    ("{'pair': (1, 2)}", dict, {"pair": [1, 2]}),
]

NEGATIVES: list[tuple[Any, Any, str]] = [
    ("", None, "empty"),
    ("   ", None, "empty"),
    (None, None, "no text"),
    ("I cannot answer that.", None, "no JSON"),
    ('{"a": 1', None, "truncated"),
    ('{"labels": ["a", "b"], "reason": "cut off by max_new_tok', None, "truncated"),  # not ["a", "b"]
    ('{"a": [1], "b": [2}', None, "invalid JSON"),
    ("[" * 5000 + "]" * 5000, None, "nested too deeply"),
    ('Result: {"a": [1, 2}', None, "invalid JSON"),
    ("[1, 2]", dict, "expected dict, got list"),
    ('{"a": 1}', list, "expected list, got dict"),
    ("true", int, "expected int, got bool"),
    ("{'a': {1, 2}}", None, "invalid JSON"),  # a set is a literal but not JSON
    ('{"a": __import__("os").getcwd()}', None, "invalid JSON"),
    ("{'a': open('/etc/passwd').read()}", None, "invalid JSON"),
    (b'{"a": 1}', None, "expected a str"),
]


@pytest.mark.parametrize(("text", "expect", "value"), POSITIVES)
def test_parse_json_answer_accepts_messy_outputs(text: str, expect: Any, value: Any) -> None:
    result = parse_json_answer(text, expect)
    assert result.ok, result.error
    assert result.value == value
    assert result.error is None


@pytest.mark.parametrize(("text", "expect", "reason"), NEGATIVES)
def test_parse_json_answer_reports_failures(text: Any, expect: Any, reason: str) -> None:
    result = parse_json_answer(text, expect)
    assert not result.ok
    assert result.value is None
    assert reason in (result.error or ""), result.error


def test_parse_json_answer_is_linear_on_degenerate_output() -> None:
    start = time.perf_counter()
    assert "truncated" in (parse_json_answer("{" * 200_000).error or "")
    assert not parse_json_answer("{x} " * 50_000).ok
    assert parse_json_answer('{"a": 1} ' * 20_000).value == {"a": 1}
    assert time.perf_counter() - start < 5


def test_parse_json_answer_never_executes(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payloads = [
        f"{{'a': __import__('pathlib').Path({str(marker)!r}).touch()}}",
        f"[exec(\"open({str(marker)!r}, 'w')\")]",
        f"{{'a': (lambda: open({str(marker)!r}, 'w'))()}}",
    ]
    for text in payloads:
        assert not parse_json_answer(text).ok
    assert not marker.exists()


# --------------------------------------------------------------------------------------- types


def test_chat_request_validates_and_normalises() -> None:
    request = ChatRequest.from_prompt("hi", system="be brief", stop="\n", max_new_tokens=5)
    assert request.messages == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert request.stop == ("\n",)
    assert request.greedy
    with pytest.raises(ValueError, match="role"):
        ChatRequest([{"role": "robot", "content": "x"}])
    with pytest.raises(ValueError, match="empty"):
        ChatRequest([])
    with pytest.raises(TypeError, match="content"):
        ChatRequest([{"role": "user", "content": None}])
    with pytest.raises(ValueError, match="temperature"):
        ChatRequest.from_prompt("x", temperature=-1)
    with pytest.raises(ValueError, match="max_new_tokens"):
        ChatRequest.from_prompt("x", max_new_tokens=0)
    with pytest.raises(ValueError, match="top_p"):
        ChatRequest.from_prompt("x", top_p=0)


def test_few_shot_messages_put_each_worked_exchange_between_the_system_and_the_prompt() -> None:
    shots = [("2 + 2?", "4"), ("3 + 3?", "6")]
    expected = [{"role": "system", "content": "Reply with the number."},
                {"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "4"},
                {"role": "user", "content": "3 + 3?"}, {"role": "assistant", "content": "6"},
                {"role": "user", "content": "5 + 5?"}]
    assert few_shot_messages("Reply with the number.", shots, "5 + 5?") == expected
    assert ChatRequest.from_prompt("5 + 5?", system="Reply with the number.", shots=shots).messages == expected
    assert few_shot_messages(None, (), "hi") == [{"role": "user", "content": "hi"}]


# --------------------------------------------------------------------------------------- cache


class CountingBackend(ChatBackend):
    """Answers "echo:<last message>"; prompts containing "FAIL" fail. Records every batch it is sent."""

    kind = "fake"

    def __init__(self, model: str = "fake/model") -> None:
        self._model = model
        self.batches: list[list[ChatRequest]] = []

    @property
    def model_id(self) -> str:
        return self._model

    def answer(self, content: str) -> str | None:
        """The reply to a last message; None makes the request fail."""
        return None if "FAIL" in content else f"echo:{content}"

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.batches.append(list(requests))
        answers = [self.answer(r.messages[-1]["content"]) for r in requests]
        return [ChatResponse.failure("HTTP 503: overloaded") if a is None
                else ChatResponse(text=a, finish_reason="stop") for a in answers]

    @property
    def calls(self) -> int:
        return sum(len(b) for b in self.batches)


def _prompts(*texts: str, **params: Any) -> list[ChatRequest]:
    return [ChatRequest.from_prompt(t, **params) for t in texts]


def test_cache_hit_and_miss(tmp_path: Path) -> None:
    inner = CountingBackend()
    backend = CachedBackend(inner, tmp_path / "cache")
    first = backend.chat(_prompts("a", "b"))
    assert [r.text for r in first] == ["echo:a", "echo:b"]
    assert not any(r.cached for r in first)
    second = backend.chat(_prompts("b", "c", "a"))
    assert [r.text for r in second] == ["echo:b", "echo:c", "echo:a"]
    assert [r.cached for r in second] == [True, False, True]
    assert [r.messages[-1]["content"] for r in inner.batches[-1]] == ["c"]  # only the miss went out
    assert inner.calls == 3
    assert backend.stats == {"hits": 2, "misses": 3, "writes": 3, "write_errors": 0, "uncached_failures": 0}
    assert backend.name == inner.name and backend.model_id == "fake/model"
    assert backend.describe()["cache_dir"] == str(tmp_path / "cache")

    # a fresh process (new CachedBackend on the same folder) resumes without any call
    resumed = CachedBackend(CountingBackend(), tmp_path / "cache")
    assert all(r.cached for r in resumed.chat(_prompts("a", "b", "c")))
    assert resumed.inner.calls == 0  # type: ignore[attr-defined]


def test_cache_layout_is_sharded_json(tmp_path: Path) -> None:
    backend = CachedBackend(CountingBackend(), tmp_path)
    request = ChatRequest.from_prompt("hello", max_new_tokens=7, seed=3)
    backend.chat([request])
    key = cache_key({"model": "fake/model"}, request)
    path = tmp_path / key[:2] / f"{key}.json"
    entry = json.loads(path.read_text())
    assert entry["text"] == "echo:hello"
    assert entry["model_id"] == "fake/model"
    assert entry["params"]["max_new_tokens"] == 7 and entry["params"]["seed"] == 3
    assert len(backend.cache) == 1
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [f"{key}.json"]  # no temp files left


def test_cache_key_holds_the_server_and_the_weights_revision(tmp_path: Path) -> None:
    """A model retrained into the same folder, or the same name served elsewhere, is a new cache key."""
    from convohub.llm import EndpointBackend

    request = ChatRequest.from_prompt("hello", max_new_tokens=4)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"v1")
    a = EndpointBackend("http://127.0.0.1:8000/v1", str(folder))
    b = EndpointBackend("http://127.0.0.1:9000/v1", str(folder))
    assert a.identity()["revision"] and a.identity()["base_url"] == "http://127.0.0.1:8000/v1"
    before = cache_key(a.identity(), request)
    assert before != cache_key(b.identity(), request)
    (folder / "model.safetensors").write_bytes(b"v2")  # retrained into the same folder
    assert cache_key(a.identity(), request) != before
    assert "revision" not in EndpointBackend("http://h/v1", "org/model").identity()


def test_cache_key_sensitivity() -> None:
    base = ChatRequest.from_prompt("hello", system="sys", max_new_tokens=16, temperature=0.0, top_p=1.0)
    key = cache_key("m", base)
    assert key == cache_key("m", ChatRequest.from_prompt("hello", system="sys", max_new_tokens=16))
    assert len(key) == 64
    variants = [
        cache_key("other-model", base),
        cache_key("m", ChatRequest.from_prompt("hello!", system="sys", max_new_tokens=16)),
        cache_key("m", ChatRequest.from_prompt("hello", system="SYS", max_new_tokens=16)),
        cache_key("m", ChatRequest.from_prompt("hello", max_new_tokens=16)),
        cache_key("m", ChatRequest.from_prompt("hello", system="sys", max_new_tokens=17)),
        cache_key("m", ChatRequest.from_prompt("hello", system="sys", max_new_tokens=16, temperature=0.7)),
        cache_key("m", ChatRequest.from_prompt("hello", system="sys", max_new_tokens=16, top_p=0.9)),
        cache_key("m", ChatRequest.from_prompt("hello", system="sys", max_new_tokens=16, seed=1)),
        cache_key("m", ChatRequest.from_prompt("hello", system="sys", max_new_tokens=16, stop=["\n"])),
    ]
    assert len({key, *variants}) == len(variants) + 1


def test_failed_responses_are_not_cached(tmp_path: Path) -> None:
    inner = CountingBackend()
    backend = CachedBackend(inner, tmp_path)
    out = backend.chat(_prompts("ok", "please FAIL"))
    assert out[0].ok and not out[1].ok and out[1].error == "HTTP 503: overloaded"
    assert backend.stats["uncached_failures"] == 1 and len(backend.cache) == 1
    again = backend.chat(_prompts("ok", "please FAIL"))
    assert again[0].cached and not again[1].cached
    assert [r.messages[-1]["content"] for r in inner.batches[-1]] == ["please FAIL"]  # retried next run
    with pytest.raises(ValueError, match="not cached"):
        backend.cache.put("0" * 64, "m", _prompts("x")[0], ChatResponse.failure("boom"))


def test_cache_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash between writing the temp file and renaming it leaves no entry and no debris."""

    def crash(src: str, dst: str) -> None:
        raise OSError("disk pulled out")

    monkeypatch.setattr(cache_module.os, "replace", crash)
    backend = CachedBackend(CountingBackend(), tmp_path)
    out = backend.chat(_prompts("a"))
    assert out[0].ok and out[0].text == "echo:a"  # the answer in hand is still returned
    assert backend.stats["write_errors"] == 1 and backend.stats["writes"] == 0
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []

    monkeypatch.undo()
    backend.chat(_prompts("a"))
    assert len(backend.cache) == 1


def test_corrupt_cache_entry_is_a_miss(tmp_path: Path) -> None:
    inner = CountingBackend()
    backend = CachedBackend(inner, tmp_path)
    request = _prompts("a")[0]
    path = backend.cache.path_for(cache_key(inner.identity(), request))
    path.parent.mkdir(parents=True)
    path.write_text('{"text": "half-writ')
    out = backend.chat([request])
    assert out[0].text == "echo:a" and not out[0].cached
    assert ResponseCache(tmp_path).get(cache_key(inner.model_id, request)) == ChatResponse(
        "echo:a", "stop", cached=True
    )


def test_run_chat_chunks_and_summary(tmp_path: Path) -> None:
    inner = CountingBackend()
    backend = CachedBackend(inner, tmp_path)
    requests = _prompts(*[f"p{i}" for i in range(10)], "FAIL me")
    out = run_chat(backend, requests, chunk_size=4, progress=False)
    assert [r.text for r in out[:10]] == [f"echo:p{i}" for i in range(10)]
    assert [len(b) for b in inner.batches] == [4, 4, 3]
    summary = response_summary(run_chat(backend, requests, chunk_size=4, progress=False))
    assert summary["total"] == 11 and summary["ok"] == 10 and summary["cached"] == 10
    assert summary["failed"] == 1 and summary["top_errors"] == {"HTTP 503: overloaded": 1}


class ScriptedBackend(CountingBackend):
    """Answers each prompt with the next answer of its script (None: a failed request); records batches."""

    def __init__(self, script: dict[str, list[str | None]]) -> None:
        super().__init__("scripted/model")
        self.script = {prompt: list(answers) for prompt, answers in script.items()}

    def answer(self, content: str) -> str | None:
        return self.script[content].pop(0)


def test_ask_until_parsed_re_asks_only_the_unparsed_a_bounded_number_of_times() -> None:
    prompts = ["a", "b", "c", "d", "e"]
    backend = ScriptedBackend({
        "a": ["1"],  # parsed at once
        "b": ["oops", "2"],  # parse raises, then parsed
        "c": [None, " meh ", "3"],  # request fails, parse returns None, then parsed on the last try
        "d": ["x", "y", "z", "never asked"],  # never parses: given up after max_attempts
        "e": ["0"],  # a falsy value is still a value
    })
    parsed_in_order: list[tuple[int, str]] = []

    def parse(i: int, text: str) -> int | None:
        parsed_in_order.append((i, text))
        if text.strip() == "meh":
            return None
        if not text.isdigit():
            raise ValueError(f"not a number: {text!r}")
        return int(text)

    def request(i: int, attempt: int) -> ChatRequest:
        return ChatRequest.from_prompt(prompts[i], temperature=1.0 if attempt else 0.0, seed=attempt or None)

    out = ask_until_parsed(backend, len(prompts), request, parse, max_attempts=3, desc="test (try {try})",
                           progress=False, chunk_size=2)
    assert out == [
        Parsed(1, [], 1),
        Parsed(2, ["not a number: 'oops'"], 2),
        Parsed(3, ["request failed: HTTP 503: overloaded", "unparseable answer 'meh'"], 3),
        Parsed(None, ["not a number: 'x'", "not a number: 'y'", "not a number: 'z'"], 3),
        Parsed(0, [], 1),
    ]
    # each try asks only what is still unparsed, in chunks of 2, with that try's sampling parameters
    asked = [[(r.messages[-1]["content"], r.temperature, r.seed) for r in batch] for batch in backend.batches]
    assert asked == [[("a", 0.0, None), ("b", 0.0, None)], [("c", 0.0, None), ("d", 0.0, None)],
                     [("e", 0.0, None)],
                     [("b", 1.0, 1), ("c", 1.0, 1)], [("d", 1.0, 1)],
                     [("c", 1.0, 2), ("d", 1.0, 2)]]
    assert backend.script["d"] == ["never asked"]
    # a failed request never reaches parse; parse sees the answers in item order within a try
    assert parsed_in_order == [(0, "1"), (1, "oops"), (3, "x"), (4, "0"), (1, "2"), (2, " meh "), (3, "y"),
                               (2, "3"), (3, "z")]
    assert ask_until_parsed(backend, 2, request, parse, max_attempts=0, desc="none", progress=False) == [
        Parsed(), Parsed()]
    assert len(backend.batches) == 6


# --------------------------------------------------------------------------------------- endpoint


class FakeOpenAIServer:
    """A loopback OpenAI-compatible chat server with scripted failures, recording what it receives.

    The last user message chooses the behaviour: ``429-once:*`` answers 429 on its first attempt,
    ``400:*`` always 400, ``500:*`` always 503; anything else gets ``echo:<message>``.
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.attempts: dict[str, int] = {}
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                    fake.bodies.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    content = body["messages"][-1]["content"]
                    attempt = fake.attempts[content] = fake.attempts.get(content, 0) + 1
                try:
                    time.sleep(fake.delay)
                    if not self.path.endswith("/v1/chat/completions"):
                        self._send(404, {"error": f"no route {self.path}"})
                    elif content.startswith("429-once:") and attempt == 1:
                        self._send(429, {"error": "rate limited"}, {"Retry-After": "0"})
                    elif content.startswith("400:"):
                        self._send(400, {"error": {"message": "bad request: unknown parameter"}})
                    elif content.startswith("500:"):
                        self._send(503, {"error": "overloaded"})
                    else:
                        self._send(200, completion(body["model"], f"echo:{content}"))
                finally:
                    with fake.lock:
                        fake.in_flight -= 1

            def _send(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def calls(self) -> int:
        return len(self.bodies)


def completion(model: str, text: str) -> dict[str, Any]:
    """A chat.completion body as OpenAI, vLLM and TGI return it."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


@pytest.fixture
def fake_server() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()
        server.thread.join(timeout=5)


def _endpoint(server: FakeOpenAIServer, **kw: Any) -> EndpointBackend:
    kw.setdefault("backoff", FAST_BACKOFF)
    return EndpointBackend(server.url, "fake-model", **kw)


def test_endpoint_success_and_params_forwarded(fake_server: FakeOpenAIServer) -> None:
    backend = _endpoint(fake_server)
    request = ChatRequest.from_prompt(
        "hi", system="sys", max_new_tokens=9, temperature=0.5, top_p=0.8, seed=7, stop=["END"]
    )
    [response] = backend.chat([request])
    assert response == ChatResponse(text="echo:hi", finish_reason="stop")
    assert response.extra["usage"]["completion_tokens"] == 2
    body = fake_server.bodies[0]
    assert body["model"] == "fake-model" and body["messages"] == request.messages
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"], body["stop"]) == (
        9,
        0.5,
        0.8,
        7,
        ["END"],
    )
    assert backend.stats == {"requests": 1, "http_calls": 1, "retries": 0, "successes": 1, "failures": 0}
    assert backend.name == "endpoint:fake-model"
    assert backend.describe() == {
        "backend": "endpoint",
        "model_id": "fake-model",
        "base_url": fake_server.url,
        "max_concurrency": 8,
    }


def test_endpoint_retries_429_then_succeeds(fake_server: FakeOpenAIServer) -> None:
    backend = _endpoint(fake_server)
    out = backend.chat(_prompts("429-once:a", "plain"))
    assert [r.text for r in out] == ["echo:429-once:a", "echo:plain"]
    assert all(r.ok for r in out)
    assert fake_server.attempts["429-once:a"] == 2
    assert backend.stats == {"requests": 2, "http_calls": 3, "retries": 1, "successes": 2, "failures": 0}


def test_endpoint_400_fails_fast_without_raising(fake_server: FakeOpenAIServer) -> None:
    backend = _endpoint(fake_server, max_retries=4)
    out = backend.chat(_prompts("400:bad", "fine"))
    assert not out[0].ok and out[0].finish_reason == "error" and out[0].text == ""
    assert "HTTP 400" in (out[0].error or "") and "unknown parameter" in (out[0].error or "")
    assert out[1].ok
    assert fake_server.attempts["400:bad"] == 1
    assert backend.stats["failures"] == 1 and backend.stats["retries"] == 0


def test_endpoint_5xx_retried_until_budget_exhausted(fake_server: FakeOpenAIServer) -> None:
    backend = _endpoint(fake_server, max_retries=2)
    [response] = backend.chat(_prompts("500:always"))
    assert (
        not response.ok
        and "HTTP 503" in (response.error or "")
        and "after 3 attempts" in (response.error or "")
    )
    assert fake_server.attempts["500:always"] == 3
    assert backend.stats == {"requests": 1, "http_calls": 3, "retries": 2, "successes": 0, "failures": 1}


def test_endpoint_connection_errors_are_retried_then_reported() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = EndpointBackend(
        f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff=FAST_BACKOFF, timeout=5
    )
    [response] = backend.chat(_prompts("x"))
    assert not response.ok and "connection error" in (response.error or "")
    assert backend.stats["retries"] == 1 and backend.stats["failures"] == 1


def test_endpoint_concurrency_is_bounded(fake_server: FakeOpenAIServer) -> None:
    fake_server.delay = 0.15
    backend = _endpoint(fake_server, max_concurrency=3)
    start = time.perf_counter()
    out = backend.chat(_prompts(*[f"q{i}" for i in range(9)]))
    elapsed = time.perf_counter() - start
    assert [r.text for r in out] == [f"echo:q{i}" for i in range(9)]  # order preserved
    assert fake_server.max_in_flight == 3
    assert elapsed >= 3 * 0.15 * 0.9  # 9 requests / 3 slots = at least three rounds


def test_endpoint_sync_chat_inside_running_event_loop(fake_server: FakeOpenAIServer) -> None:
    backend = _endpoint(fake_server)

    async def handler() -> list[ChatResponse]:
        sync_result = backend.chat(_prompts("from-sync"))  # e.g. a sync helper called from async code
        async_result = await backend.achat(_prompts("from-async"))
        return sync_result + async_result

    out = asyncio.run(handler())
    assert [r.text for r in out] == ["echo:from-sync", "echo:from-async"]


def test_endpoint_with_cache_makes_no_calls_on_rerun(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    endpoint = _endpoint(fake_server)
    backend = CachedBackend(endpoint, tmp_path)
    requests = _prompts("a", "429-once:b", "400:c")
    first = backend.chat(requests)
    assert [r.ok for r in first] == [True, True, False]
    calls = fake_server.calls
    second = backend.chat(requests)
    assert [r.cached for r in second] == [True, True, False]
    assert fake_server.calls == calls + 1  # only the failed request was re-sent


def test_endpoint_constructor_errors() -> None:
    with pytest.raises(ValueError, match="http"):
        EndpointBackend("localhost:8000", "m")
    with pytest.raises(ValueError, match="CONVOHUB_LLM_MODEL"):
        EndpointBackend("http://127.0.0.1:8000/v1", "")
    with pytest.raises(ValueError, match="max_concurrency"):
        EndpointBackend("http://127.0.0.1:8000/v1", "m", max_concurrency=0)
    with pytest.raises(ValueError, match="backoff"):
        EndpointBackend("http://127.0.0.1:8000/v1", "m", backoff=(2.0, 1.0))


# --------------------------------------------------------------------------------------- factory


@pytest.fixture
def clean_llm_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (
        "CONVOHUB_LLM_BASE_URL",
        "CONVOHUB_LLM_MODEL",
        "CONVOHUB_LLM_API_KEY",
        "CONVOHUB_LLM_CACHE_DIR",
        "HF_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_make_backend_specs(clean_llm_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    backend = make_backend("endpoint:http://127.0.0.1:8000/v1#org/model-1", max_retries=1)
    assert isinstance(backend, EndpointBackend)
    assert (backend.base_url, backend.model, backend.max_retries) == (
        "http://127.0.0.1:8000/v1",
        "org/model-1",
        1,
    )
    assert make_backend("https://host.example/v1#m").model_id == "m"  # type: ignore[union-attr]
    assert make_backend("http://127.0.0.1:8000", model="given").model_id == "given"
    clean_llm_env.setenv("CONVOHUB_LLM_MODEL", "from-env")
    assert make_backend("http://127.0.0.1:8000/v1").model_id == "from-env"
    cached = make_backend("http://127.0.0.1:8000/v1#m", cache_dir=tmp_path)
    assert isinstance(cached, CachedBackend) and isinstance(cached.inner, EndpointBackend)


def test_make_backend_errors_say_what_to_set(clean_llm_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="local:/path/to/model"):
        make_backend("gpt-4o")
    with pytest.raises(ValueError, match="CONVOHUB_LLM_BASE_URL"):
        make_backend("  ")
    with pytest.raises(ValueError, match="CONVOHUB_LLM_MODEL"):
        make_backend("http://127.0.0.1:8000/v1")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        make_backend(f"local:{tmp_path / 'missing'}")
    with pytest.raises(TypeError, match="model_id"):
        make_backend(f"local:{tmp_path}", model="x")


def test_backend_from_env(clean_llm_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert backend_from_env() is None
    clean_llm_env.setenv("CONVOHUB_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    with pytest.raises(ValueError, match="CONVOHUB_LLM_BASE_URL=.*CONVOHUB_LLM_MODEL"):
        backend_from_env()
    clean_llm_env.setenv("CONVOHUB_LLM_MODEL", "org/judge")
    backend = backend_from_env(max_concurrency=2)
    assert (
        isinstance(backend, EndpointBackend) and backend.model == "org/judge" and backend.max_concurrency == 2
    )
    clean_llm_env.setenv("CONVOHUB_LLM_CACHE_DIR", str(tmp_path))
    cached = backend_from_env()
    assert isinstance(cached, CachedBackend) and cached.name == "endpoint:org/judge"


def test_api_keys_go_only_where_intended(
    clean_llm_env: pytest.MonkeyPatch, fake_server: FakeOpenAIServer
) -> None:
    clean_llm_env.setenv("HF_TOKEN", "hf_secret")
    make_backend(f"{fake_server.url}#m", backoff=FAST_BACKOFF).chat(_prompts("x"))
    assert "authorization" not in fake_server.headers[-1]  # a Hub token is not sent to third parties
    clean_llm_env.setenv("CONVOHUB_LLM_API_KEY", "sk-local")
    make_backend(f"{fake_server.url}#m", backoff=FAST_BACKOFF).chat(_prompts("y"))
    assert fake_server.headers[-1]["authorization"] == "Bearer sk-local"


def test_loopback_endpoint_works_with_hub_offline(
    monkeypatch: pytest.MonkeyPatch, fake_server: FakeOpenAIServer
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # huggingface_hub would refuse every URL
    [response] = _endpoint(fake_server).chat(_prompts("offline"))
    assert response.ok and response.text == "echo:offline"


@pytest.mark.parametrize(
    ("url", "hf"),
    [
        ("https://router.huggingface.co/v1", True),
        ("https://abc123.us-east-1.aws.endpoints.huggingface.cloud/v1", True),
        ("https://user-space.hf.space", True),
        ("http://127.0.0.1:8000/v1", False),
        ("https://api.example.com/v1", False),
        ("https://huggingface.co.evil.example/v1", False),
    ],
)
def test_hf_host_detection_and_default_key(url: str, hf: bool, clean_llm_env: pytest.MonkeyPatch) -> None:
    from convohub.llm.factory import _default_api_key
    from convohub.llm.hosts import is_hf_host

    assert is_hf_host(url) is hf
    clean_llm_env.setenv("HF_TOKEN", "hf_secret")
    assert _default_api_key(url) == ("hf_secret" if hf else None)
    clean_llm_env.setenv("CONVOHUB_LLM_API_KEY", "explicit")
    assert _default_api_key(url) == "explicit"


def test_hub_hosts_stay_blocked_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    backend = EndpointBackend("https://router.huggingface.co/v1", "org/model", backoff=FAST_BACKOFF)
    [response] = backend.chat(_prompts("x"))
    assert not response.ok and "HF_HUB_OFFLINE" in (response.error or "")
    assert backend.stats["http_calls"] == 1 and backend.stats["retries"] == 0


# --------------------------------------------------------------------------------------- local model


@pytest.fixture(scope="module")
def tiny_causal() -> Path:
    from convohub.tiny import tiny_model

    return tiny_model("causal")


@pytest.fixture(scope="module")
def local_backend(tiny_causal: Path) -> TransformersBackend:
    return TransformersBackend(tiny_causal, device="cpu", batch_size=4)


def test_transformers_backend_generates_batches(local_backend: TransformersBackend) -> None:
    prompts = ["hello", "a much longer prompt so that the batch needs left padding to line up", "x"]
    out = local_backend.chat(_prompts(*prompts, max_new_tokens=6))
    assert len(out) == 3 and all(r.ok and r.finish_reason in ("stop", "length") for r in out)
    assert all(isinstance(r.text, str) and not r.cached for r in out)
    # greedy + left padding: an answer does not depend on what else is in the batch
    alone = local_backend.chat(_prompts(prompts[1], max_new_tokens=6))
    assert alone[0].text == out[1].text
    assert local_backend.name == f"local:{local_backend.model_path}"


def _chat_counting_prefix_runs(backend: TransformersBackend,
                               requests: list[ChatRequest]) -> tuple[list[ChatResponse], list[int]]:
    """``backend.chat(requests)``, and the tokens of every forward pass run for one row without a cache: the shared
    prompt prefixes the backend ran once to keep their keys and values."""
    prefixes: list[int] = []
    forward = backend.model.forward

    def spy(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("use_cache") and kwargs.get("cache") is None and kwargs["input_ids"].shape[0] == 1:
            prefixes.append(kwargs["input_ids"].shape[1])
        return forward(*args, **kwargs)

    backend.model.forward = spy
    try:
        return backend.chat(requests), prefixes
    finally:
        del backend.model.forward  # the class's forward again


def test_a_batch_runs_its_shared_prompt_prefix_once_with_the_same_answers(
    local_backend: TransformersBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import convohub.llm.local as local_module

    system = "You answer questions about travel, food and museums in one short sentence. " * 4
    questions = ["Where is the Louvre?", "What do people eat in Lisbon at breakfast on a rainy Sunday?", "Why?"]
    requests = [ChatRequest([{"role": "system", "content": system}, {"role": "user", "content": q}], max_new_tokens=6)
                for q in questions]
    tok = local_backend.tokenizer
    ids = [tok(tok.apply_chat_template(r.messages, tokenize=False, add_generation_prompt=True),
               add_special_tokens=False)["input_ids"] for r in requests]
    shared = local_module.shared_prefix(ids)
    assert shared >= local_module.MIN_SHARED_PREFIX and all(len(i) > shared for i in ids)
    batched, prefixes = _chat_counting_prefix_runs(local_backend, requests)
    assert prefixes == [shared]  # the shared prefix ran once, as one row
    # every answer is the one its prompt gets alone (greedy), and the one the plain padded path gives
    alone = [local_backend.chat([r])[0].text for r in requests]
    monkeypatch.setattr(local_module, "MIN_SHARED_PREFIX", 10**9)
    plain = local_backend.chat(requests)
    assert [r.text for r in batched] == alone == [r.text for r in plain]
    sampled = [ChatRequest(r.messages, max_new_tokens=6, temperature=1.0, seed=7) for r in requests]
    monkeypatch.undo()
    assert [r.text for r in local_backend.chat(sampled)] == [r.text for r in local_backend.chat(sampled)]


def test_batches_are_cut_so_that_requests_with_the_same_leading_messages_share_one(
    local_backend: TransformersBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import convohub.llm.local as local_module

    monkeypatch.setattr(local_module, "MIN_PREFIX_GROUP", 4)
    systems = ["You answer questions about travel, food and museums in one short sentence. " * 4,
               "You answer questions about gardens, tools and weather in one short sentence. " * 4]
    questions = ["Where?", "What is the best time of the year to go there and why?", "Why so?",
                 "Which one of them is the oldest one in the whole country today?"]
    # by length alone the two systems alternate, so no batch of four would share more than the template's start
    requests = [ChatRequest([{"role": "system", "content": systems[k % 2]}, {"role": "user", "content": q}],
                            max_new_tokens=4) for q in questions for k in range(2)]
    batches = local_module.plan_batches(requests, range(len(requests)), 4)
    assert sorted(map(sorted, batches)) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert all([len(requests[i].messages[1]["content"]) for i in b] == sorted(map(len, questions), reverse=True)
               for b in batches)
    # one system for all: the plain longest-first cut; a system fewer than MIN_PREFIX_GROUP share: cut with the rest
    same = [0, 2, 4, 6]
    assert local_module.plan_batches(requests, same, 3) == [[6, 2, 4], [0]]
    assert local_module.plan_batches(requests, [*same, 1], 4) == [[6, 2, 4, 0], [1]]
    assert local_module.plan_batches(requests, [0, 1, 2], 4) == [[2, 1, 0]]
    batched, prefixes = _chat_counting_prefix_runs(local_backend, requests)
    assert len(prefixes) == 2 and min(prefixes) >= local_module.MIN_SHARED_PREFIX  # one shared prefix per batch
    assert [r.text for r in batched] == [local_backend.chat([r])[0].text for r in requests]  # in request order


def test_transformers_backend_decodes_only_new_tokens(
    local_backend: TransformersBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[int]] = []
    real = local_backend._finish

    def spy(new_ids: list[int], request: ChatRequest) -> ChatResponse:
        seen.append(list(new_ids))
        return real(new_ids, request)

    monkeypatch.setattr(local_backend, "_finish", spy)
    prompt = "hello there, this prompt is longer than the answer"
    [response] = local_backend.chat(_prompts(prompt, max_new_tokens=4))
    assert len(seen) == 1 and 1 <= len(seen[0]) <= 4  # the generated part only, bounded by max_new_tokens
    assert response.text == local_backend.tokenizer.decode(seen[0], skip_special_tokens=True)
    assert prompt not in response.text


def test_transformers_backend_sampling_seed_and_stop(local_backend: TransformersBackend) -> None:
    sampled = _prompts("tell me", "tell me", max_new_tokens=8, temperature=1.0, top_p=0.95, seed=123)
    first = local_backend.chat(sampled)
    again = local_backend.chat(sampled)
    assert [r.text for r in first] == [r.text for r in again]  # same seed, same batch -> same samples
    greedy = local_backend.chat(_prompts("tell me", max_new_tokens=12))[0].text
    if len(greedy) > 2:
        stop = greedy[1:3]
        [cut] = local_backend.chat(_prompts("tell me", max_new_tokens=12, stop=[stop]))
        assert cut.finish_reason == "stop" and stop not in cut.text and greedy.startswith(cut.text)


def test_make_backend_local_spec(tiny_causal: Path) -> None:
    backend = make_backend(f"local:{tiny_causal}", device="cpu", batch_size=2)
    assert isinstance(backend, TransformersBackend) and backend.batch_size == 2
    assert isinstance(make_backend(str(tiny_causal), device="cpu"), TransformersBackend)
    from convohub.models import weights_digest

    assert backend.describe() == {"backend": "local", "model_id": str(tiny_causal), "device": "cpu",
                                  "revision": weights_digest(tiny_causal)}


def test_transformers_backend_isolates_a_failing_request(
    local_backend: TransformersBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = local_backend._generate

    def flaky(batch: list[ChatRequest]) -> list[ChatResponse]:
        if any("poison" in r.messages[-1]["content"] for r in batch):
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(batch)

    monkeypatch.setattr(local_backend, "_generate", flaky)
    out = local_backend.chat(_prompts("fine", "poison pill", "also fine", max_new_tokens=3))
    assert [r.ok for r in out] == [True, False, True]
    assert "out of memory" in (out[1].error or "")


def test_endpoint_concurrency_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONVOHUB_LLM_CONCURRENCY", raising=False)
    assert make_backend("http://127.0.0.1:1/v1#m").max_concurrency == 8  # type: ignore[attr-defined]
    monkeypatch.setenv("CONVOHUB_LLM_CONCURRENCY", "3")
    assert make_backend("http://127.0.0.1:1/v1#m").max_concurrency == 3  # type: ignore[attr-defined]
    assert make_backend("http://127.0.0.1:1/v1#m", max_concurrency=5).max_concurrency == 5  # type: ignore[attr-defined]
    monkeypatch.setenv("CONVOHUB_LLM_CONCURRENCY", "zero")
    with pytest.raises(ValueError, match="CONVOHUB_LLM_CONCURRENCY='zero'"):
        make_backend("http://127.0.0.1:1/v1#m")

"""Any OpenAI-compatible chat endpoint (vLLM, TGI, `transformers serve`, Inference Providers).

Requests go through :class:`huggingface_hub.AsyncInferenceClient` (``base_url=...``) so auth, URL
suffixes (``/v1/chat/completions``) and error types match the rest of the Hugging Face stack. On top of
it this module adds what long labelling runs need and the client leaves to callers:

* bounded concurrency (an :class:`asyncio.Semaphore`; a backoff sleep does not hold a slot);
* retries with exponential backoff and jitter on transient failures only -- HTTP 408/429/5xx, timeouts
  and connection errors -- honouring ``Retry-After``; any other 4xx fails fast (retrying a malformed
  request just burns quota);
* per-request errors returned in :class:`ChatResponse` instead of raised, with counts in ``stats``;
* a synchronous :meth:`EndpointBackend.chat` that also works when the caller already runs an event
  loop (notebooks, Gradio handlers): the batch then runs on a private loop in a worker thread.

Non-Hub endpoints get an HTTP session of their own, for two reasons. ``HF_HUB_OFFLINE=1`` makes
huggingface_hub refuse *every* request, loopback included, but the variable is about not contacting the
Hub and an endpoint URL is an explicit choice. And huggingface_hub attaches the locally stored Hub token
(``HF_TOKEN`` / ``hf auth login``) to any URL when no key is given; a self-hosted vLLM or a third-party
server must not receive it, so that session drops the implicit token (an explicit ``api_key`` is sent).
Hugging Face hosts (the Inference Providers router, Inference Endpoints, Spaces) keep the stock client:
offline mode blocks them, as the user asked, and they get the Hub token.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar
from urllib.parse import urlparse

from huggingface_hub import AsyncInferenceClient
from huggingface_hub.errors import HfHubHTTPError, InferenceTimeoutError, OfflineModeIsEnabled

from .hosts import is_hf_host
from .types import ChatBackend, ChatRequest, ChatResponse

try:  # the HTTP library huggingface_hub is built on; its transport errors are retryable
    import httpx2 as _http
except ImportError:  # pragma: no cover - older/newer huggingface_hub on plain httpx
    import httpx as _http  # type: ignore[no-redef]

_RETRYABLE_STATUS = frozenset({408, 429})
_STATS_KEYS = ("requests", "http_calls", "retries", "successes", "failures")
T = TypeVar("T")


async def _read_error_body(response: Any) -> None:
    """Load error bodies so the raised HfHubHTTPError carries the server's explanation."""
    if response.status_code >= 400:
        await response.aread()


async def _drop_implicit_token(request: Any) -> None:
    request.headers.pop("authorization", None)


class _DirectClient(AsyncInferenceClient):
    """AsyncInferenceClient with a private HTTP session for non-Hub endpoints (see the module doc)."""

    def __init__(self, *, send_auth: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._send_auth = send_auth

    async def _get_async_client(self) -> Any:
        if self._async_client is None:
            hooks: dict[str, list[Any]] = {"response": [_read_error_body]}
            if not self._send_auth:
                hooks["request"] = [_drop_implicit_token]
            session = _http.AsyncClient(event_hooks=hooks, follow_redirects=True, timeout=None)
            self._async_client = await self.exit_stack.enter_async_context(session)
        return self._async_client


def _retry_after(response: Any) -> float | None:
    value = getattr(response, "headers", {}).get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP-date; exponential backoff is good enough


def _classify(exc: BaseException) -> tuple[bool, str, float | None]:
    """(retryable?, human-readable reason, server-requested delay)."""
    if isinstance(exc, OfflineModeIsEnabled):
        return (
            False,
            f"{exc} (HF_HUB_OFFLINE=1 blocks Hugging Face hosts; unset it to use this endpoint)",
            None,
        )
    if isinstance(exc, HfHubHTTPError) and getattr(exc, "response", None) is not None:
        response = exc.response
        status = response.status_code
        try:
            body = " ".join(response.text.split())[:300]
        except Exception:  # body not read (streamed/huge): the exception text is all we have
            body = ""
        reason = f"HTTP {status}: {body or (str(exc).splitlines() or [type(exc).__name__])[0]}"
        return status in _RETRYABLE_STATUS or status >= 500, reason, _retry_after(response)
    if isinstance(exc, (InferenceTimeoutError, TimeoutError, asyncio.TimeoutError, _http.TimeoutException)):
        return True, f"timeout: {exc}", None
    if isinstance(exc, (_http.TransportError, ConnectionError)):
        return True, f"connection error: {type(exc).__name__}: {exc}", None
    return False, f"{type(exc).__name__}: {exc}", None


def _run_sync(coro_factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from sync code, even if this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_factory())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="convohub-llm") as pool:
        return pool.submit(lambda: asyncio.run(coro_factory())).result()


class EndpointBackend(ChatBackend):
    """Chat completions from an OpenAI-compatible server at ``base_url`` for model ``model``.

    ``base_url`` may end in ``/v1`` or not (``http://127.0.0.1:8000`` and ``.../v1`` both work).
    ``backoff=(base, cap)``: the n-th retry waits ``min(cap, base * 2**(n-1))`` scaled by a random factor
    in [0.5, 1] (jitter de-synchronises concurrent retries), or the server's ``Retry-After`` if larger
    (still capped).

    ``stats``: ``requests`` (logical requests), ``http_calls`` (attempts), ``retries``, ``successes``,
    ``failures``.
    """

    kind = "endpoint"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        max_concurrency: int = 8,
        max_retries: int = 4,
        timeout: float = 60,
        backoff: tuple[float, float] = (0.5, 8.0),
    ) -> None:
        parsed = urlparse(base_url or "")
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"EndpointBackend base_url must be an http(s):// URL, got {base_url!r}")
        if not model:
            raise ValueError(
                "EndpointBackend needs a model name as the server knows it (vLLM: the served model name; "
                "`transformers serve`: the repo id or path it was started with); set CONVOHUB_LLM_MODEL "
                "or use the spec 'URL#MODEL'"
            )
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        base, cap = backoff
        if not 0 <= base <= cap:
            raise ValueError(f"backoff must be (base, cap) with 0 <= base <= cap, got {backoff}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = (float(base), float(cap))
        self._lock = threading.Lock()
        self.stats: dict[str, int] = dict.fromkeys(_STATS_KEYS, 0)

    @property
    def model_id(self) -> str:
        return self.model

    def describe(self) -> dict[str, Any]:
        return {"backend": self.kind, "model_id": self.model, "base_url": self.base_url,
                "max_concurrency": self.max_concurrency}

    def identity(self) -> dict[str, Any]:
        """Model and base URL; when the served model is a local folder (``transformers serve`` started on a
        path), also the hash of its weight files, so retraining into that folder invalidates the cache."""
        from convohub.models import weights_digest

        ident: dict[str, Any] = {"model": self.model, "base_url": self.base_url}
        revision = weights_digest(self.model) if "/" in self.model or "\\" in self.model else ""
        if revision:
            ident["revision"] = revision
        return ident

    def __repr__(self) -> str:
        return f"EndpointBackend({self.base_url!r}, {self.model!r})"

    def _bump(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _make_client(self) -> AsyncInferenceClient:
        if is_hf_host(self.base_url):
            return AsyncInferenceClient(base_url=self.base_url, api_key=self._api_key, timeout=self.timeout)
        return _DirectClient(
            base_url=self.base_url,
            api_key=self._api_key,
            timeout=self.timeout,
            send_auth=self._api_key is not None,
        )

    def _delay(self, retry: int, retry_after: float | None) -> float:
        base, cap = self.backoff
        delay = min(cap, base * 2 ** (retry - 1)) * random.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = max(delay, min(cap, retry_after))
        return delay

    async def _call(self, client: AsyncInferenceClient, request: ChatRequest) -> ChatResponse:
        kwargs: dict[str, Any] = {"max_tokens": request.max_new_tokens, "temperature": request.temperature}
        if request.top_p < 1.0:
            kwargs["top_p"] = request.top_p
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.stop:
            kwargs["stop"] = list(request.stop)
        output = await client.chat_completion(messages=request.messages, model=self.model, **kwargs)
        if not output.choices:
            raise ValueError("the server answered with no choices")
        choice = output.choices[0]
        extra: dict[str, Any] = {}
        if getattr(output, "usage", None) is not None:
            usage = output.usage
            extra["usage"] = {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
            }
        return ChatResponse(
            text=choice.message.content or "", finish_reason=choice.finish_reason, extra=extra
        )

    async def _one(
        self, client: AsyncInferenceClient, slots: asyncio.Semaphore, request: ChatRequest
    ) -> ChatResponse:
        self._bump("requests")
        retry = 0
        while True:
            async with slots:
                self._bump("http_calls")
                try:
                    response = await self._call(client, request)
                except Exception as exc:  # classified below; never escapes the batch
                    retryable, reason, retry_after = _classify(exc)
                else:
                    self._bump("successes")
                    return response
            if not retryable or retry >= self.max_retries:
                self._bump("failures")
                attempts = retry + 1
                suffix = f" (after {attempts} attempts)" if attempts > 1 else ""
                return ChatResponse.failure(reason + suffix)
            retry += 1
            self._bump("retries")
            await asyncio.sleep(self._delay(retry, retry_after))

    async def achat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        """Async version of :meth:`chat`, for callers that already run an event loop."""
        if not requests:
            return []
        slots = asyncio.Semaphore(self.max_concurrency)
        async with self._make_client() as client:
            return list(await asyncio.gather(*(self._one(client, slots, r) for r in requests)))

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        requests = list(requests)
        return _run_sync(lambda: self.achat(requests))

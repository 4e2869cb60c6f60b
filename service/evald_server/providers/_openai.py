"""The ``openai`` provider: any OpenAI-compatible ``/v1/chat/completions`` server, and
its ``/v1/completions`` for a model registered with ``completions`` (loglikelihood
calls, ``providers._echo``).

Built on aiohttp because the HTTP client is on the hot path: on these 2-core machines
aiohttp sustains thousands of requests per second where httpx's default transport
tops out near 130 (``python -m bench.bench_provider``). One ``ClientSession`` per
provider, a keep-alive pool of ``pool_size`` connections, never a session per request.

Every foreign error (aiohttp, JSON, asyncio timeouts, OS errors) is translated here
into ``ProviderFailure`` and chained. The API key is read once from the environment
variable the model names; it is sent as ``Authorization: Bearer`` and nowhere else:
not in ``repr``, log records, exception messages or error metadata. Whatever the
provider sends back (error bodies, exception texts, answers) is scrubbed of it, in
any case and in pieces, before it is cut or kept (``SecretScrubber``).

What a provider can send is bounded per model: a non-streamed body by
``max_response_bytes`` (read in chunks, stopped one chunk past the cap), the answer
text, streamed or not, by ``max_answer_bytes``, an SSE line by aiohttp's line limit.
Hitting a cap is PROVIDER_BAD_RESPONSE naming the cap. The numbers in an answer are
checked by ``_answer_bounds`` (usage against ``context_tokens``), the rate-limit
headers by ``_rate_limit_headers`` (resets capped at ``rate_limit_reset_cap_s``, limits
below their floors ignored with one warning per header and reason).
"""

import dataclasses
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from evald_server.config import ConfigError, ModelConfig
from evald_server.providers._answer_bounds import AnswerBounds
from evald_server.providers._base import (
    Completion,
    ContinuationAnswer,
    ContinuationRequest,
    ProviderFailure,
    ProviderRequest,
)
from evald_server.providers._echo import (
    EchoInconsistent,
    continuation_score,
    echo_request_fields,
    loads_object,
    split_context,
)
from evald_server.providers._openai_wire import (
    AnswerTooLarge,
    MalformedResponse,
    ParsedCompletion,
    StreamAccumulator,
    chat_url,
    completions_url,
    error_detail,
    parse_completion,
    parse_plain_completion,
    plain_request_body,
    request_body,
)
from evald_server.providers._rate_limit_headers import (
    HeaderBounds,
    RateLimitInfo,
    parse_rate_limit_headers,
)
from evald_server.providers._retry_classification import (
    bad_response_failure,
    connection_failure,
    inconsistent_echo_failure,
    status_failure,
    timeout_failure,
)
from evald_server.providers._scrub import REDACTED, SecretScrubber

_log = logging.getLogger(__name__)

# An error body is only read for its excerpt: the rest is not worth the memory.
_ERROR_BODY_BYTES = 64 * 1024
_READ_CHUNK = 64 * 1024
_Answer = TypeVar("_Answer")


class BodyTooLarge(Exception):
    """The response body exceeds the model's ``max_response_bytes``."""


class _Secret:
    """Holds the API key so that no ``repr``/``str``/``vars`` dump can show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return REDACTED

    __str__ = __repr__


class OpenAIProvider:
    """Calls ``POST {base_url}/v1/chat/completions`` (see ``chat_url`` for the URL rule).

    The session is created lazily on the first call, inside the running event loop
    (aiohttp binds it to that loop). Cancelling a ``complete`` call closes its
    connection, so the server sees the request aborted at once.
    """

    wants_reference = False

    def __init__(self, model: ModelConfig, *, pool_size: int) -> None:
        if model.base_url is None:  # ModelConfig already enforces this for "openai"
            raise ConfigError(f"models[{model.id}].base_url: required for provider 'openai'")
        if pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, got {pool_size}")
        self._model_id = model.id
        self._model_name = model.provider_model
        self._url = chat_url(model.base_url)
        self._completions_url = (
            completions_url(model.base_url) if "completions" in model.endpoints else None
        )
        self._echo_max_tokens = model.echo_max_tokens
        self._loglikelihood_source = model.loglikelihood_source
        self._pool_size = pool_size
        self._timeout_s = model.timeout_s
        self._stream = model.stream
        self._schema_format = model.structured_output_format
        self._key = _read_key(model)
        self._scrub = SecretScrubber([] if self._key is None else [self._key.reveal()])
        self._max_response_bytes = model.max_response_bytes
        self._max_answer_bytes = model.max_answer_bytes
        self._bounds = AnswerBounds.of(model)
        self._header_bounds = HeaderBounds.of(model)
        self._warned: set[tuple[str, str]] = set()  # (header, why) already logged
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"OpenAIProvider(model_id={self._model_id!r}, url={self._url!r}, "
            f"pool_size={self._pool_size}, stream={self._stream})"
        )

    @property
    def url(self) -> str:
        """The chat-completions endpoint this provider posts to."""
        return self._url

    async def complete(self, request: ProviderRequest) -> Completion:
        if request.prompt_text is not None:  # the plain format: completions, not streamed
            body = plain_request_body(self._model_name, request)
            return await self._exchange(
                self._completions_endpoint(), body, request.request_key, self._read_plain
            )
        body = request_body(
            self._model_name, request, stream=self._stream, schema_format=self._schema_format
        )
        return await self._exchange(self._url, body, request.request_key, self._read)

    def _completions_endpoint(self) -> str:
        if self._completions_url is None:
            raise RuntimeError(f"model {self._model_id!r} is not registered with 'completions'")
        return self._completions_url

    async def loglikelihood(self, request: ContinuationRequest) -> ContinuationAnswer:
        """One echo call to ``/v1/completions`` (``providers._echo``)."""
        url = self._completions_endpoint()
        context, continuation = split_context(request.context, request.continuation)
        fields = echo_request_fields(
            context + continuation,
            self._echo_max_tokens,
            request.seed,
            source=self._loglikelihood_source,
        )
        body = json.dumps(
            {"model": self._model_name, **fields}, ensure_ascii=False, separators=(",", ":")
        ).encode()

        async def read(response: aiohttp.ClientResponse, started: float) -> ContinuationAnswer:
            return await self._read_echo(response, started, context, continuation)

        return await self._exchange(url, body, request.request_key, read)

    async def _exchange(
        self,
        url: str,
        body: bytes,
        key: str,
        read: Callable[[aiohttp.ClientResponse, float], Awaitable[_Answer]],
    ) -> _Answer:
        """POST ``body``, read the answer with ``read``; every foreign error translated."""
        session = self._session_or_create()
        headers = {"Content-Type": "application/json", "X-Evald-Subtask": key}
        started = time.perf_counter()
        try:
            response = await session.post(url, data=body, headers=headers, allow_redirects=False)
            try:
                return await read(response, started)
            except BaseException:
                # A half-read or cancelled answer must not go back to the pool: closing the
                # connection is what tells the server the request was abandoned.
                response.close()
                raise
            finally:
                response.release()
        except ProviderFailure as exc:
            _log.debug("model %s: %s", self._model_id, exc.message)
            raise
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            translated = self._translate(exc, time.perf_counter() - started)
            _log.debug("model %s: %s", self._model_id, translated.message)
            raise translated from exc

    async def aclose(self) -> None:
        """Close the pool; calls still in flight fail with a connection error."""
        self._closed = True
        if self._session is not None:
            await self._session.close()

    def _session_or_create(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError(f"provider for model {self._model_id!r} is closed")
        if self._session is None:
            headers = {"Accept": "application/json"}
            if self._key is not None:
                headers["Authorization"] = f"Bearer {self._key.reveal()}"
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size, limit_per_host=0),
                timeout=aiohttp.ClientTimeout(total=self._timeout_s),
                headers=headers,
                trust_env=False,  # the operator's config, not the process env, says where to go
            )
        return self._session

    async def _fail_status(self, response: aiohttp.ClientResponse, started: float) -> None:
        """A non-200 answer as its ProviderFailure."""
        raw = await _read_prefix(response, _ERROR_BODY_BYTES)
        detail = error_detail(raw, scrub=self._scrub)
        latency_s = time.perf_counter() - started
        failure = status_failure(response.status, response.headers, detail, latency_s=latency_s)
        failure.rate_limits = self._rate_limits(response)
        raise failure

    async def _read_echo(
        self, response: aiohttp.ClientResponse, started: float, context: str, continuation: str
    ) -> ContinuationAnswer:
        if response.status != 200:
            await self._fail_status(response, started)
        try:
            data = loads_object(await _read_capped(response, self._max_response_bytes))
        except BodyTooLarge as exc:
            raise bad_response_failure(
                f"response body exceeds max_response_bytes ({self._max_response_bytes} bytes) "
                f"of model {self._model_id}; reading stopped",
                http_status=200,
                latency_s=time.perf_counter() - started,
            ) from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise bad_response_failure(
                f"invalid JSON ({type(exc).__name__})",
                http_status=200,
                latency_s=time.perf_counter() - started,
            ) from exc
        try:
            score = continuation_score(
                data, context, continuation, self._bounds, source=self._loglikelihood_source
            )
        except EchoInconsistent as exc:
            raise inconsistent_echo_failure(
                exc.kind,
                f"{self._scrub(exc.detail)} (model {self._model_id}, {self._completions_url})",
                latency_s=time.perf_counter() - started,
            ) from exc
        return ContinuationAnswer(
            logprob=score.logprob,
            tokens=score.tokens,
            latency_s=time.perf_counter() - started,
            prompt_tokens=score.prompt_tokens,
            completion_tokens=score.completion_tokens,
            rate_limits=self._rate_limits(response),
        )

    async def _read_plain(self, response: aiohttp.ClientResponse, started: float) -> Completion:
        return await self._read(response, started, plain=True)

    async def _read(
        self, response: aiohttp.ClientResponse, started: float, *, plain: bool = False
    ) -> Completion:
        if response.status == 200 and self._stream and not plain:
            return await self._read_stream(response, started)
        if response.status != 200:
            await self._fail_status(response, started)
        parse = parse_plain_completion if plain else parse_completion
        try:
            raw = await _read_capped(response, self._max_response_bytes)
            parsed = parse(raw, max_answer_bytes=self._max_answer_bytes, bounds=self._bounds)
        except BodyTooLarge as exc:
            raise bad_response_failure(
                f"response body exceeds max_response_bytes ({self._max_response_bytes} bytes) "
                f"of model {self._model_id}; reading stopped",
                http_status=200,
                latency_s=time.perf_counter() - started,
            ) from exc
        except MalformedResponse as exc:
            raise bad_response_failure(
                self._bad_detail(exc), http_status=200, latency_s=time.perf_counter() - started
            ) from exc
        completion = self._completion(parsed, time.perf_counter() - started, None)
        return self._with_rate_limits(completion, response)

    async def _read_stream(self, response: aiohttp.ClientResponse, started: float) -> Completion:
        stream = StreamAccumulator(max_answer_bytes=self._max_answer_bytes, bounds=self._bounds)
        ttft_s: float | None = None
        try:
            async for line in response.content:
                if stream.feed(line) and ttft_s is None:
                    ttft_s = time.perf_counter() - started
                if stream.done:
                    break
            parsed = stream.result()
        except (MalformedResponse, ValueError) as exc:  # ValueError: an SSE line too long
            raise bad_response_failure(
                self._bad_detail(exc), http_status=200, latency_s=time.perf_counter() - started
            ) from exc
        completion = self._completion(parsed, time.perf_counter() - started, ttft_s)
        return self._with_rate_limits(completion, response)

    def _with_rate_limits(
        self, completion: Completion, response: aiohttp.ClientResponse
    ) -> Completion:
        info = self._rate_limits(response)
        return completion if info is None else dataclasses.replace(completion, rate_limits=info)

    def _rate_limits(self, response: aiohttp.ClientResponse) -> RateLimitInfo | None:
        """The response's rate-limit headers within the model's bounds; a header capped
        or ignored is logged once per header and reason, not at every answer."""
        info = parse_rate_limit_headers(response.headers, self._header_bounds)
        for adjusted in () if info is None else info.adjusted:
            if (adjusted.header, adjusted.why) not in self._warned:
                self._warned.add((adjusted.header, adjusted.why))
                _log.warning(
                    "model %s: provider header %s: %s %s",
                    self._model_id,
                    adjusted.header,
                    self._scrub(adjusted.value[:100]),
                    adjusted.why,
                )
        return info

    def _bad_detail(self, exc: Exception) -> str:
        if isinstance(exc, AnswerTooLarge):
            return f"{exc} (model {self._model_id})"
        if isinstance(exc, ValueError) and not isinstance(exc, MalformedResponse):
            return f"an SSE line exceeds the reader's line limit ({exc})"
        return self._scrub(str(exc))

    def _completion(
        self, parsed: ParsedCompletion, latency_s: float, ttft_s: float | None
    ) -> Completion:
        return Completion(
            text=self._scrub(parsed.text),  # a gateway may echo the request into the answer
            latency_s=latency_s,
            ttft_s=ttft_s,
            prompt_tokens=parsed.prompt_tokens,
            completion_tokens=parsed.completion_tokens,
            finish_reason=parsed.finish_reason.value,
            top_logprobs=parsed.top_logprobs,
            flags=parsed.flags,
            tool_calls=parsed.tool_calls,
        )

    def _translate(self, exc: BaseException, latency_s: float) -> ProviderFailure:
        if isinstance(exc, TimeoutError):  # asyncio's total timeout and aiohttp's socket ones
            return timeout_failure(self._timeout_s, latency_s=latency_s)
        if isinstance(exc, aiohttp.ClientResponseError):
            return bad_response_failure(self._describe(exc), latency_s=latency_s)
        if isinstance(exc, aiohttp.ClientConnectorError):  # nothing listens, DNS, unreachable
            errno = exc.os_error.errno
            cause = os.strerror(errno) if errno else self._scrub(str(exc.os_error))
            return connection_failure(
                f"cannot connect to {_without_userinfo(self._url)} "
                f"(model {self._model_id}): {cause}",
                latency_s=latency_s,
            )
        # ClientConnectionError, ClientPayloadError (body cut short), OSError, the rest.
        return connection_failure(self._describe(exc), latency_s=latency_s)

    def _describe(self, exc: BaseException) -> str:
        text = self._scrub(" ".join(str(exc).split()))[:200]  # scrub first, then cut
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _read_key(model: ModelConfig) -> _Secret | None:
    if model.api_key_env is None:
        return None  # a local server (vLLM, llama.cpp) often needs no key
    value = os.environ.get(model.api_key_env, "")
    if not value.strip():
        raise ConfigError(
            f"models[{model.id}].api_key_env: environment variable "
            f"{model.api_key_env!r} is not set or empty"
        )
    return _Secret(value.strip())


def _without_userinfo(url: str) -> str:
    """The URL as shown in errors: a ``user:password@`` in it is the operator's secret."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host  # an IPv6 literal keeps its brackets
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit(parts._replace(netloc=netloc))


async def _read_capped(response: aiohttp.ClientResponse, cap: int) -> bytes:
    """The body, or ``BodyTooLarge`` once more than ``cap`` bytes arrived (or are announced)."""
    if response.content_length is not None and response.content_length > cap:
        raise BodyTooLarge()
    body = bytearray()
    while chunk := await response.content.read(_READ_CHUNK):
        body += chunk
        if len(body) > cap:
            raise BodyTooLarge()
    return bytes(body)


async def _read_prefix(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """At most ``limit`` bytes of the body (the connection is closed after an error)."""
    body = bytearray()
    while len(body) < limit and (chunk := await response.content.read(limit - len(body))):
        body += chunk
    return bytes(body)

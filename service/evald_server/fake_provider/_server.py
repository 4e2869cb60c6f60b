"""``FakeProvider``: a real OpenAI-compatible HTTP server on 127.0.0.1, with faults.

Serves ``POST /v1/chat/completions`` (JSON or SSE when the body sets ``stream``),
``POST /v1/completions`` (echo with log-probabilities, ``_completions``) with the
tokenizer API lm-evaluation-harness reads (``/tokenizer_info``, ``/tokenize``,
``/detokenize``), plus a small control API for a fake running in another process:

* ``GET /_fake/journal?since=N``: journal entries after arrival number N, and the
  keys requested again after success;
* ``GET /_fake/stats``: counters, peaks, process CPU per request, current config;
* ``POST /_fake/config``: replace the config fields present in the JSON body;
* ``POST /_fake/reset``: clear the journal and the CPU baseline.

aiohttp.web runs with handler cancellation on, so a client that goes away cancels its
handler at once: the journal records the disconnect and the in-flight count drops.
The server speaks asyncio directly (aiohttp is asyncio-only).
"""

import asyncio
import json
import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import anyio
from aiohttp import web

from evald_server.config import ModelConfig
from evald_server.fake_provider._behaviour import Behaviour, FakeConfig, Kind
from evald_server.fake_provider._completions import (
    GENERATED,
    EchoLogprobFn,
    EchoMode,
    Vocabulary,
    completion_choice,
    completions_body,
    hashed_logprob,
    prompts_of,
    tokenize,
)
from evald_server.fake_provider._journal import Journal, JournalEntry
from evald_server.fake_provider._logprobs import AlternativesFn, first_piece, logprobs_block
from evald_server.fake_provider._quota import QuotaState, retry_after
from evald_server.fake_provider._responses import (
    DONE_EVENT,
    MALFORMED_BODY,
    MALFORMED_EVENT,
    completion_body,
    error_body,
    flood_body,
    flood_events,
    retry_headers,
    scripted_body,
    scripted_events,
    stream_events,
    tokens,
    truncate,
)

_FLOOD_PIECE = 64 * 1024

_JSON = "application/json"
# Request fields a journal entry keeps verbatim (what a tool or schema task sent).
_EXTRAS = ("tools", "tool_choice", "response_format")


@dataclass(frozen=True, slots=True)
class FakeChatRequest:
    """What an answer callable sees of a request."""

    key: str | None
    model: str
    messages: tuple[Mapping[str, Any], ...]
    body: Mapping[str, Any]

    @property
    def last_content(self) -> str:
        return str(self.messages[-1].get("content", "")) if self.messages else ""


AnswerFn = Callable[[FakeChatRequest], str]


class FakeProvider:
    """The fake server; ``async with FakeProvider(config) as fake:`` starts and stops it.

    Answers, first match wins: ``Behaviour.answer``, ``config.answers[key]``,
    ``config.model_answers[model]``, the ``answer`` callable, else an echo of the last
    message's content (deterministic).
    """

    def __init__(
        self,
        config: FakeConfig | None = None,
        *,
        answer: AnswerFn | None = None,
        port: int = 0,
        max_journal_entries: int = 1_000_000,
        alternatives: AlternativesFn = first_piece,
        echo_logprob: EchoLogprobFn = hashed_logprob,
    ) -> None:
        self._config = config or FakeConfig()
        self._answer_fn = answer
        self._alternatives = alternatives
        self._echo_logprob = echo_logprob
        self.vocabulary = Vocabulary()  # the tokenizer API's token ids
        self._port = port
        self.journal = Journal(max_entries=max_journal_entries)
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None
        self._cpu_base = time.process_time()
        self._started_at = time.monotonic()
        # Streams in progress, for ``interrupt_streams``: set the event to cut one short.
        self._live_streams: set[asyncio.Event] = set()
        self._cut_short: set[int] = set()  # journal seqs of streams cut by a bare [DONE]
        self.quota_state = QuotaState()
        # The quotas' clock: a test sets its own to see refills as exact numbers rather
        # than as races against a loaded machine's scheduling.
        self.quota_clock: Callable[[], float] = time.monotonic

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> str:
        """Bind 127.0.0.1 (port 0 unless given) and return the base URL."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/tokenizer_info", self._tokenizer_info)
        app.router.add_post("/tokenize", self._tokenize)
        app.router.add_post("/detokenize", self._detokenize)
        app.router.add_get("/_fake/journal", self._get_journal)
        app.router.add_get("/_fake/stats", self._get_stats)
        app.router.add_post("/_fake/config", self._post_config)
        app.router.add_post("/_fake/reset", self._post_reset)
        runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5
        )
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self._port)
        await site.start()
        self._runner = runner
        port = runner.addresses[0][1]
        self._base_url = f"http://127.0.0.1:{port}"
        self.reset()
        return self._base_url

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("the fake provider is not started")
        return self._base_url

    # -- configuration and inspection --------------------------------------------------

    @property
    def config(self) -> FakeConfig:
        return self._config

    def configure(self, config: FakeConfig | None = None, **changes: Any) -> FakeConfig:
        """Replace the config (or some of its fields); requests already sleeping keep theirs."""
        base = config or self._config
        self._config = FakeConfig(**{**_config_fields(base), **changes})
        return self._config

    def script_key(self, key: str, *behaviours: Behaviour) -> None:
        """The first ``len(behaviours)`` requests carrying ``key`` get these behaviours."""
        self.configure(per_key={**self._config.per_key, key: behaviours})

    def reset(self) -> None:
        """Forget the journal and restart the CPU-per-request baseline."""
        self.journal.reset()
        self.quota_state.reset()
        self._cpu_base = time.process_time()
        self._started_at = time.monotonic()

    def stats(self) -> dict[str, Any]:
        stats = self.journal.stats()
        cpu_s = time.process_time() - self._cpu_base
        stats["cpu_s"] = cpu_s
        stats["cpu_per_request_us"] = cpu_s / stats["requests"] * 1e6 if stats["requests"] else None
        stats["uptime_s"] = time.monotonic() - self._started_at
        stats["config"] = self._config.to_json()
        return stats

    async def wait_until(
        self, predicate: Callable[[Journal], bool], *, timeout_s: float = 5.0
    ) -> None:
        """Wait until ``predicate`` holds for the journal; ``TimeoutError`` after ``timeout_s``."""
        with anyio.fail_after(timeout_s):
            while not predicate(self.journal):
                await self.journal.changed()

    def model_config(self, model_id: str = "fake-model", **fields: Any) -> ModelConfig:
        """An ``openai`` ``ModelConfig`` pointing at this fake."""
        return ModelConfig(
            **{"id": model_id, "provider": "openai", "base_url": self.base_url, **fields}
        )

    # -- the chat endpoint -------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        key = request.headers.get("X-Evald-Subtask")
        try:
            chat, stream, include_usage = _parse_chat(await request.read(), key)
        except ValueError as exc:
            entry = self.journal.begin(key, None, stream=False, client_port=_port(request))
            self.journal.end(entry, "bad_request", 400)
            return _error(400, f"invalid request: {exc}")
        entry = self.journal.begin(key, chat.model, stream=stream, client_port=_port(request))
        extras = {k: chat.body[k] for k in _EXTRAS if k in chat.body}
        entry.request_extras = extras or None
        config = self._config
        # llama-cpp-python's interrupt_requests: any new request cuts the streams already
        # accepted (waiting or streaming); this one may be cut by the next in turn.
        interrupt = asyncio.Event()
        if config.interrupt_streams:
            for other in self._live_streams:
                other.set()
            if stream:
                self._live_streams.add(interrupt)
        limited, quota_headers = self._rate_limit(config, chat, entry)
        if limited is not None:
            return limited
        behaviour = self._behaviour(request, config, entry, chat)
        try:
            delay_s = config.hang_s if behaviour.kind is Kind.HANG else 0.0
            delay_s += config.latency_s(behaviour, entry.seq - 1, key, entry.attempt)
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            if behaviour.kind is Kind.RESET:
                self.journal.end(entry, "reset", None)
                _reset(request)
                await asyncio.sleep(config.hang_s)  # connection_lost cancels this at once
                raise ConnectionResetError("reset by the fake")
            response = await self._respond(
                request,
                behaviour,
                config,
                chat,
                entry,
                stream,
                include_usage,
                interrupt,
                quota_headers,
            )
        except (asyncio.CancelledError, ConnectionResetError):
            self._cut_short.discard(entry.seq)
            if entry.finished_at is None:
                self.journal.disconnect(entry, behaviour.label)
            raise
        finally:
            self._live_streams.discard(interrupt)
        cut = entry.seq in self._cut_short
        self._cut_short.discard(entry.seq)
        self.journal.end(entry, Kind.INTERRUPTED.value if cut else behaviour.label, response.status)
        return response

    def _rate_limit(
        self, config: FakeConfig, chat: FakeChatRequest, entry: JournalEntry
    ) -> tuple[web.Response | None, dict[str, str]]:
        """A 429 when the hidden concurrency cap or the model's quota is exceeded (else
        None), and the quota's headers for the answer."""
        if config.max_concurrent is not None and self.journal.in_flight(chat.model) > (
            config.max_concurrent
        ):
            self.journal.end(entry, "over_capacity", 429)
            return _error(429, "fake: over capacity", retry_after(1.0)), {}
        quota = config.quota_for(chat.model)
        if quota is None:
            return None, {}
        max_tokens = chat.body.get("max_tokens")
        cost = sum(tokens(str(m.get("content", ""))) for m in chat.messages)
        cost += max_tokens if isinstance(max_tokens, int) else 0
        verdict = self.quota_state.admit(chat.model, quota, cost, self.quota_clock())
        if not verdict.admitted:
            self.journal.end(entry, f"quota_{verdict.exceeded}", 429)
            message = f"fake: rate limit reached for {verdict.exceeded} per minute"
            return _error(429, message, verdict.headers), {}
        return None, verdict.headers

    def _behaviour(
        self, request: web.Request, config: FakeConfig, entry: JournalEntry, chat: FakeChatRequest
    ) -> Behaviour:
        authorization = request.headers.get("Authorization")
        if config.api_key is not None and authorization != f"Bearer {config.api_key}":
            return Behaviour.error(401)
        return config.choose(entry.seq - 1, entry.key, entry.attempt, chat.last_content)

    async def _respond(
        self,
        request: web.Request,
        behaviour: Behaviour,
        config: FakeConfig,
        chat: FakeChatRequest,
        entry: JournalEntry,
        stream: bool,
        include_usage: bool,
        interrupt: asyncio.Event,
        quota_headers: Mapping[str, str],
    ) -> web.StreamResponse:
        scripted_headers = dict(behaviour.headers)
        if behaviour.kind is Kind.STATUS:
            headers = retry_headers(
                behaviour.retry_after_s,
                behaviour.retry_after_ms,
                http_date=behaviour.retry_after_http_date,
            )
            message = behaviour.message or f"fake {behaviour.label}"
            return _error(behaviour.status, message, {**headers, **scripted_headers})
        quota_headers = {**quota_headers, **scripted_headers}
        if behaviour.kind is Kind.MALFORMED and not stream:
            return web.Response(body=MALFORMED_BODY, content_type=_JSON)
        if behaviour.kind is Kind.FLOOD:
            return await self._flood(request, behaviour, chat, entry, stream)
        text, natural_end = truncate(
            self._answer(behaviour, config, chat), chat.body.get("max_tokens")
        )
        finish_reason: str | None = natural_end
        if behaviour.kind is Kind.INTERRUPTED:
            finish_reason = None
        elif behaviour.finish_reason is not None:
            finish_reason = behaviour.finish_reason
        prompt_tokens = sum(tokens(str(m.get("content", ""))) for m in chat.messages)
        logprobs = None
        if chat.body.get("logprobs") is True:
            top_n = chat.body.get("top_logprobs")
            logprobs = logprobs_block(
                self._alternatives(chat, text), top_n if isinstance(top_n, int) else 1
            )
        if config.send_usage:
            entry.prompt_tokens, entry.completion_tokens = prompt_tokens, tokens(text)
        if behaviour.kind is Kind.SCRIPTED:
            return await self._scripted(
                request,
                behaviour,
                chat,
                entry,
                stream,
                text,
                prompt_tokens,
                quota_headers,
                include_usage=include_usage and config.send_usage,
            )
        if not stream:
            body = completion_body(
                entry.seq,
                chat.model,
                text,
                prompt_tokens,
                finish_reason=finish_reason,
                usage=config.send_usage,
                logprobs=logprobs,
            )
            return web.Response(body=body, content_type=_JSON, headers=quota_headers)
        response = _event_stream(quota_headers)
        await response.prepare(request)
        events = stream_events(
            entry.seq,
            chat.model,
            text,
            prompt_tokens,
            include_usage=include_usage and config.send_usage,
            finish_reason=finish_reason,
            logprobs=logprobs,
        )
        for index, event in enumerate(events):
            if behaviour.kind is Kind.MALFORMED and index == 1:
                await response.write(MALFORMED_EVENT)
                break
            if behaviour.kind is Kind.INTERRUPTED and index == behaviour.after_chunks:
                interrupt.set()
            if index > 1 and config.stream_chunk_ms > 0:
                await asyncio.sleep(config.stream_chunk_ms / 1000.0)
            # llama-cpp-python sends the role chunk, then a bare [DONE], no finish_reason.
            cut_at = behaviour.after_chunks if behaviour.kind is Kind.INTERRUPTED else 1
            if interrupt.is_set() and index >= cut_at:
                self._cut_short.add(entry.seq)
                await response.write(DONE_EVENT)
                break
            await response.write(event)
        await response.write_eof()
        return response

    async def _scripted(
        self,
        request: web.Request,
        behaviour: Behaviour,
        chat: FakeChatRequest,
        entry: JournalEntry,
        stream: bool,
        text: str,
        prompt_tokens: int,
        headers: Mapping[str, str],
        *,
        include_usage: bool,
    ) -> web.StreamResponse:
        fields = behaviour.fields or {}
        counted = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": tokens(text),
            "total_tokens": prompt_tokens + tokens(text),
        }
        if not stream:
            body = scripted_body(entry.seq, chat.model, fields, text, counted)
            return web.Response(body=body, content_type=_JSON, headers=headers)
        response = _event_stream(headers)
        await response.prepare(request)
        usage = counted if include_usage else None
        for event in scripted_events(entry.seq, chat.model, fields, text, usage):
            await response.write(event)
        await response.write_eof()
        return response

    async def _flood(
        self,
        request: web.Request,
        behaviour: Behaviour,
        chat: FakeChatRequest,
        entry: JournalEntry,
        stream: bool,
    ) -> web.StreamResponse:
        if not stream:
            response = web.StreamResponse(headers={"Content-Type": _JSON})
            await response.prepare(request)
            for piece in flood_body(entry.seq, chat.model, behaviour.body_bytes, _FLOOD_PIECE):
                await response.write(piece)
            await response.write_eof()
            return response
        response = _event_stream()
        await response.prepare(request)
        sent = 0
        for event in flood_events(entry.seq, chat.model, behaviour.delta_bytes):
            if behaviour.body_bytes and sent >= behaviour.body_bytes:
                break
            await response.write(event)  # drains: a client that stops reading stops us
            sent += behaviour.delta_bytes
        await response.write(DONE_EVENT)
        await response.write_eof()
        return response

    def _answer(self, behaviour: Behaviour, config: FakeConfig, chat: FakeChatRequest) -> str:
        if behaviour.answer is not None:
            return behaviour.answer
        if chat.key is not None and chat.key in config.answers:
            return config.answers[chat.key]
        if chat.model in config.model_answers:
            return config.model_answers[chat.model]
        if self._answer_fn is not None:
            return self._answer_fn(chat)
        return chat.last_content

    # -- the completions endpoint and its tokenizer ------------------------------------

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        """Echo with log-probabilities (``_completions``); the chat endpoint's journal,
        quotas, latency and status faults apply."""
        key = request.headers.get("X-Evald-Subtask")
        try:
            body = json.loads(await request.read())
            if not isinstance(body, dict) or not isinstance(body.get("model"), str):
                raise ValueError("model: required string")
            prompts = prompts_of(body.get("prompt"), self.vocabulary)
        except ValueError as exc:
            entry = self.journal.begin(key, None, stream=False, client_port=_port(request))
            self.journal.end(entry, "bad_request", 400)
            return _error(400, f"invalid request: {exc}")
        messages = tuple({"role": "user", "content": p} for p in prompts)
        chat = FakeChatRequest(key, body["model"], messages, body)
        entry = self.journal.begin(key, chat.model, stream=False, client_port=_port(request))
        config = self._config
        limited, quota_headers = self._rate_limit(config, chat, entry)
        if limited is not None:
            return limited
        behaviour = self._behaviour(request, config, entry, chat)
        try:
            delay_s = config.latency_s(behaviour, entry.seq - 1, key, entry.attempt)
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            if behaviour.kind is Kind.STATUS:
                response = _error(behaviour.status, behaviour.message or behaviour.label)
            else:
                response = self._echo(
                    body, prompts, chat.model, entry, quota_headers, behaviour, key
                )
        except asyncio.CancelledError:
            if entry.finished_at is None:
                self.journal.disconnect(entry, behaviour.label)
            raise
        self.journal.end(entry, behaviour.label, response.status)
        return response

    def _echo(
        self,
        body: Mapping[str, Any],
        prompts: list[str],
        model: str,
        entry: JournalEntry,
        headers: Mapping[str, str],
        behaviour: Behaviour,
        key: str | None,
    ) -> web.Response:
        max_tokens = body.get("max_tokens")
        mode = EchoMode(self._config.echo_mode)
        echo = body.get("echo") is True
        choices, prompt_tokens, completion_tokens = [], 0, 0
        for index, prompt in enumerate(prompts):
            answer, finish_reason = GENERATED, "length"
            if not echo:  # a plain prompt: the answer the chat endpoint would give
                chat = FakeChatRequest(key, model, ({"role": "user", "content": prompt},), body)
                answer, finish_reason = truncate(
                    self._answer(behaviour, self._config, chat), max_tokens
                )
            choice, used, made = completion_choice(
                index,
                prompt,
                echo=echo,
                max_tokens=max_tokens if isinstance(max_tokens, int) else 16,
                logprob=self._echo_logprob,
                mode=mode,
                answer=answer,
                finish_reason=finish_reason,
            )
            if isinstance(body.get("prompt_logprobs"), int) and not echo:
                choice["prompt_logprobs"] = self._prompt_logprobs(prompt)
            choices.append(choice)
            prompt_tokens += used
            completion_tokens += made
        entry.prompt_tokens, entry.completion_tokens = prompt_tokens, completion_tokens
        payload = completions_body(entry.seq, model, choices, prompt_tokens, completion_tokens)
        return web.Response(body=payload, content_type=_JSON, headers=headers)

    def _prompt_logprobs(self, prompt: str) -> list[dict[str, dict[str, Any]] | None]:
        """vLLM's ``prompt_logprobs`` with 0 alternatives: null, then each prompt token
        alone under its id, with the same numbers an echo lists."""
        tokens, ids = tokenize(prompt), self.vocabulary.encode(prompt)
        listed: list[dict[str, dict[str, Any]] | None] = [None]
        for i in range(1, len(tokens)):
            value = self._echo_logprob("".join(tokens[:i]), tokens[i])
            listed.append({str(ids[i]): {"logprob": value, "rank": 1, "decoded_token": tokens[i]}})
        return listed

    async def _tokenizer_info(self, request: web.Request) -> web.Response:
        return web.json_response(self.vocabulary.info())

    async def _tokenize(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        return web.json_response({"tokens": self.vocabulary.encode(str(body.get("prompt", "")))})

    async def _detokenize(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        tokens = body.get("tokens") or []
        return web.json_response({"prompt": self.vocabulary.decode([int(t) for t in tokens])})

    # -- the control API ---------------------------------------------------------------

    async def _get_journal(self, request: web.Request) -> web.Response:
        try:
            since = int(request.query.get("since", "0"))
        except ValueError:
            return _error(400, "since must be an integer")
        entries = [e.to_json() for e in self.journal.entries if e.seq > since]
        return web.json_response(
            {
                "entries": entries,
                "truncated": self.journal.truncated,
                "duplicates_after_success": self.journal.duplicates_after_success(),
            }
        )

    async def _get_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _post_config(self, request: web.Request) -> web.Response:
        try:
            data = json.loads(await request.read())
            if not isinstance(data, dict):
                raise ValueError("the body must be a JSON object")
            self._config = self._config.updated(data)
        except (ValueError, TypeError, KeyError) as exc:
            return _error(400, f"invalid config: {exc}")
        return web.json_response(self._config.to_json())

    async def _post_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"reset": True})


def _parse_chat(raw: bytes, key: str | None) -> tuple[FakeChatRequest, bool, bool]:
    body = json.loads(raw)  # JSONDecodeError is a ValueError
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    model = body.get("model")
    messages = body.get("messages")
    if not isinstance(model, str) or not model:
        raise ValueError("model: required string")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ValueError("messages: required list of objects")
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    chat = FakeChatRequest(key, model, tuple(messages), body)
    return chat, bool(body.get("stream")), include_usage


def _event_stream(extra: Mapping[str, str] | None = None) -> web.StreamResponse:
    return web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **(extra or {})}
    )


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=error_body(status, message), content_type=_JSON, headers=headers
    )


def _port(request: web.Request) -> int | None:
    """The client's source port: tells which pooled connection carried the request."""
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    return int(peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else None


def _reset(request: web.Request) -> None:
    """Close the connection abruptly: SO_LINGER 0 makes the kernel send an RST."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _config_fields(config: FakeConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in FakeConfig.__dataclass_fields__}

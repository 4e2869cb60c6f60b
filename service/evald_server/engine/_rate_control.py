"""Rate control per model, shared by every run on it: AIMD concurrency, RPM/TPM token
buckets, and the provider's own rate-limit headers.

* ``Aimd`` moves the model limit's capacity: slow start (one more slot per success)
  until the first rate-limit episode; then one multiplicative decrease per episode and
  one more slot after a window of successes. An episode is the burst of 429s of calls
  that were already in flight when the first was answered (sent before the decrease):
  one decrease for the whole burst. A 429 of a call sent after it is a new episode (a
  time-based grace would let an over-limit slot spin on instant 429s); the dispatcher
  applies the decrease before the 429'd call frees its slot, so no call goes out at
  the old value after it. The decrease starts from the calls that were in flight when
  the 429'd call was sent (at most the value): in slow start the value has run ahead
  of what was tested. A window of successes counts only calls sent at the current
  value (after its last change): successes of calls sent at a lower value say
  nothing about this one. For ``cooldown_s`` after a decrease nothing increases.
* ``TokenBucket``: ``requests_per_minute`` and ``tokens_per_minute``, ``budget_burst_s``
  deep. Tokens are estimated before a call (prompt characters / 4 + ``max_tokens``, or
  the model's mean completion when the run sets none) and corrected by the reported
  usage after: the prompt's part always, the completion's part when no ``max_tokens``
  bounded it (a provider that is given ``max_tokens`` counts it in full, as OpenAI does).
  A call that does not fit waits here, before it takes a server-wide slot, on its own
  model's worker: no other model's call waits behind it.
* Headers: a response saying no request (or too few tokens) is left holds new calls
  until the provider's refill gives one, so the provider is not asked to say 429; a
  limit the provider states (``x-ratelimit-limit-*``) where the config declares none
  becomes the model's budget.

Single event loop: no locking. The clock is ``time.monotonic``.
"""

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import anyio

from evald_server.config import ModelConfig
from evald_server.domain import OutcomeKind
from evald_server.engine._limits import Limit, Limiter
from evald_server.providers import RateLimitInfo
from evald_server.store import SubtaskOutcome

CHARS_PER_TOKEN = 4  # the usual estimate for English text with BPE tokenizers
# Budgets refill at this share of the stated rate: a call reaches the provider some
# milliseconds after evald charged it, and that delay varies, so at exactly the stated
# rate the provider's bucket is the emptier one whenever both are near empty (measured:
# a third of the calls answered 429 at 100 %; bench_rate_control).
HEADROOM = 0.95
_FIRST_COMPLETION_GUESS = 256  # tokens, until the model has answered once


@dataclass(frozen=True, slots=True)
class RateSettings:
    """One model's rate-control knobs (from its ``[[models]]`` table)."""

    adaptive: bool = False
    min_concurrency: int = 1
    start_concurrency: int = 1
    max_concurrency: int = 16
    increase_after: int | None = None
    decrease_factor: float = 0.8
    cooldown_s: float = 0.2
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst_s: float = 1.0

    @classmethod
    def of(cls, model: ModelConfig) -> "RateSettings":
        adaptive = model.adaptive_concurrency
        return cls(
            adaptive=adaptive.enabled,
            min_concurrency=adaptive.min,
            start_concurrency=adaptive.min if adaptive.start is None else adaptive.start,
            max_concurrency=model.max_concurrency,
            increase_after=adaptive.increase_after,
            decrease_factor=adaptive.decrease_factor,
            cooldown_s=adaptive.cooldown_s,
            requests_per_minute=model.requests_per_minute,
            tokens_per_minute=model.tokens_per_minute,
            burst_s=model.budget_burst_s,
        )


class Aimd:
    """Additive increase, multiplicative decrease of one model's concurrency."""

    def __init__(self, settings: RateSettings, now: float) -> None:
        self.min = settings.min_concurrency
        self.max = settings.max_concurrency
        self.value = float(settings.start_concurrency)
        self.slow_start = True
        self.episodes = 0
        self._increase_after = settings.increase_after
        self._factor = settings.decrease_factor
        self._cooldown_s = settings.cooldown_s
        self._decreased_at = -math.inf
        self._changed_at = -math.inf  # the last decrease or additive increase
        self._successes = 0
        self._created = now

    @property
    def capacity(self) -> int:
        return max(self.min, min(self.max, int(self.value)))

    def on_success(self, sent_at: float, now: float, replicas: int = 1) -> None:
        """A success of a call sent at the full limit. With n ``replicas`` each running
        its own AIMD against the same provider, the window of successes is n² times as
        long. One process climbs one slot a round of calls and, at an episode, drops a
        fifth of its value V; of n replicas, the one whose call met the 429 drops a
        fifth of its V / n. For the sawtooth to keep one process's period (and its
        share of 429s, one burst a period), the n of them must together climb 1 / n of
        a slot a round: each 1 / n², its window n² rounds of its own V / n calls
        (bench_replica_rates X2)."""
        if sent_at < self._decreased_at or now - self._decreased_at < self._cooldown_s:
            return  # sent at the old, too high value, or still cooling down
        if self.slow_start:
            self.value = min(float(self.max), self.value + 1.0)
            return
        if sent_at < self._changed_at:
            return  # sent at a lower value: it does not test this one
        self._successes += 1
        if self._successes >= (self._increase_after or self.capacity) * max(1, replicas) ** 2:
            self._successes = 0
            self.value = min(float(self.max), self.value + 1.0)
            self._changed_at = now

    def on_rate_limited(self, sent_at: float, now: float, in_flight: int | None = None) -> bool:
        """A 429: decrease once per episode; True when this one started an episode.
        ``in_flight``: the calls in flight when the 429'd call was sent, itself included."""
        if sent_at < self._decreased_at:
            return False
        tested = self.capacity if in_flight is None else min(self.capacity, in_flight)
        self.value = max(float(self.min), math.floor(tested * self._factor))
        self.slow_start = False
        self.episodes += 1
        self._decreased_at = self._changed_at = now
        self._successes = 0
        return True

    def on_peer_episodes(self, now: float) -> None:
        """Other replicas calling the same provider had rate-limit episodes since the last
        balancing: decrease once here too. A provider's 429 hits whichever call arrives
        while it is full, rarely the replica holding most of its capacity (each of its
        answers frees a place that its next call takes at once), so without this a
        replica at the top keeps its calls while the others' climb back meets 429 after
        429. The decrease is not an episode of this replica's."""
        if now - self._decreased_at < self._cooldown_s:
            return
        self.value = max(float(self.min), math.floor(self.capacity * self._factor))
        self.slow_start = False
        self._decreased_at = self._changed_at = now
        self._successes = 0


class TokenBucket:
    """``per_minute`` units a minute, at most ``burst_s`` seconds' worth banked. A take
    larger than the bucket waits for a full bucket and leaves it in debt. At a rate of 0
    (no share of a budget several replicas share) nothing fits."""

    def __init__(self, per_minute: float, burst_s: float, now: float) -> None:
        self._burst_s = burst_s
        self._at = now
        self._set(per_minute)
        self.level = self.capacity

    def _set(self, per_minute: float) -> None:
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * self._burst_s) if per_minute > 0 else 0.0

    def set_rate(self, per_minute: float, now: float) -> None:
        """Refill at ``per_minute`` from now on; what is banked above the new depth goes."""
        self._refill(now)
        self._set(per_minute)
        self.level = min(self.level, self.capacity)

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self._at) * self.rate)
        self._at = max(self._at, now)

    def wait_s(self, amount: float, now: float) -> float:
        self._refill(now)
        missing = min(amount, self.capacity) - self.level
        if missing <= 0 and self.rate > 0:
            return 0.0
        return math.inf if self.rate <= 0 else missing / self.rate

    def take(self, amount: float) -> None:
        self.level -= amount

    def give_back(self, amount: float, now: float) -> None:
        self._refill(now)
        self.level = min(self.capacity, self.level + amount)


class Budget:
    """One of a model's budgets (requests or tokens a minute): the rate stated for the
    model (declared, or learned from the provider), this process's share of it (all of
    it in one process; on a shared store, what the balancing gives it), the bucket that
    refills at that share, and the demand the balancing weighs the shares by."""

    def __init__(self, stated: float, burst_s: float, now: float, share: float) -> None:
        self.stated = stated
        self.share = share
        self.bucket = TokenBucket(HEADROOM * share, burst_s, now)
        self.taken = 0.0  # units charged since the last balancing
        self.waiting = 0.0  # units of the calls waiting for this budget now

    @property
    def in_force(self) -> float:
        """The rate this process's calls are admitted at (its share, less the headroom)."""
        return self.bucket.per_minute

    def set_share(self, share: float, now: float) -> None:
        self.share = share
        self.bucket.set_rate(HEADROOM * share, now)

    def demand(self) -> float:
        """Units wanted since the last call (charged, and waiting now); starts anew."""
        wanted = self.taken + self.waiting
        self.taken = 0.0
        return wanted


@dataclass(frozen=True, slots=True)
class TokenEstimate:
    prompt: int
    completion: int
    bounded: bool  # the completion part is the run's max_tokens, not a guess

    @property
    def total(self) -> int:
        return self.prompt + self.completion


NO_TOKENS = TokenEstimate(0, 0, bounded=True)


@dataclass(slots=True)
class Ticket:
    """One admitted call: what it was charged and when it was sent (``sending``)."""

    model_id: str
    estimate: TokenEstimate
    sent_at: float
    in_flight: int = 0  # the model's calls sent and unfinished when it went, itself included
    at_limit: bool = False  # it took the model limit's last free slot
    settled: bool = False  # ``finished`` has seen it
    requests: float = 1.0  # the requests it was charged (loglikelihood: one per choice)

    @property
    def estimated_tokens(self) -> int:
        return self.estimate.total


@dataclass(frozen=True, slots=True)
class RateStats:
    """One model's rate control as statistics, progress events and the dashboard show it."""

    model_id: str
    adaptive: bool
    concurrency: int  # the current value (the model limit's, within this replica's share)
    min_concurrency: int
    max_concurrency: int
    slow_start: bool
    episodes: int  # rate-limit episodes, each one decrease
    rate_limited: int  # calls answered 429
    waiting: int  # calls waiting for request/token budget or a provider's reset
    held_until_s: float  # seconds new calls are still held by the provider's headers
    requests_per_minute: float | None = None  # the budgets in force (declared or learned)
    tokens_per_minute: float | None = None
    learned: bool = False  # a budget was learned from the provider's headers
    # Several replicas on one store: how many are live, this one included; the model's
    # concurrency and episodes summed over them (as each published them at its latest
    # balancing); this replica's share of each budget, per minute (all of it alone).
    replicas: int = 1
    replicas_concurrency: int = 0
    replicas_episodes: int = 0
    requests_share: float | None = None
    tokens_share: float | None = None


class ModelRateControl:
    def __init__(
        self, model_id: str, settings: RateSettings, limit: Limit, clock: Callable[[], float]
    ) -> None:
        self.model_id = model_id
        self.settings = settings
        self._limit = limit
        self._clock = clock
        now = clock()
        self.aimd = Aimd(settings, now) if settings.adaptive else None
        rpm, tpm = settings.requests_per_minute, settings.tokens_per_minute
        self.requests = None if rpm is None else Budget(rpm, settings.burst_s, now, rpm)
        self.tokens = None if tpm is None else Budget(tpm, settings.burst_s, now, tpm)
        # Replicas share the store: a budget learned from headers starts with no share
        # until the next balancing gives it one (alone, it is all of it at once).
        self.shared = False
        self.replicas = 1
        self.peer_concurrency = 0  # the other live replicas' published figures
        self.peer_episodes = 0
        self._budget_changed: anyio.Event | None = None  # set when a share moves
        self._held_until = -math.inf  # the provider's headers said: nothing left until then
        self._completion_mean = float(_FIRST_COMPLETION_GUESS)
        self._answer_s: float | None = None  # the mean time a successful call takes
        self._answers = 0
        self.rate_limited = 0
        self.waiting = 0
        self._sent = 0  # calls sent and not yet finished
        self.learned = False  # a budget came from the provider's x-ratelimit-limit-*
        if self.aimd is not None:
            limit.set_capacity(self.aimd.capacity)
        limit.min_capacity = settings.min_concurrency if settings.adaptive else limit.capacity
        limit.max_capacity = settings.max_concurrency

    @property
    def concurrency(self) -> int:
        """The calls this replica may have in flight on the model now: the limit's value,
        capped by its share of the model's limit on a shared store."""
        ceiling = self._limit.ceiling
        capacity = self._limit.capacity
        return capacity if ceiling is None else min(capacity, ceiling)

    @property
    def episodes(self) -> int:
        return 0 if self.aimd is None else self.aimd.episodes

    @property
    def counts_tokens(self) -> bool:
        return self.tokens is not None

    def estimate(self, prompt_chars: int, max_tokens: int | None) -> TokenEstimate:
        prompt = math.ceil(prompt_chars / CHARS_PER_TOKEN)
        if max_tokens is not None:
            return TokenEstimate(prompt, max_tokens, bounded=True)
        return TokenEstimate(prompt, math.ceil(self._completion_mean), bounded=False)

    def _wait_s(self, estimate: TokenEstimate, now: float, requests: float = 1.0) -> float:
        """How long a call of ``estimate`` (``requests`` requests) must wait for the
        provider's reset and for every budget (0 or less: it may go now)."""
        wait = self._held_until - now
        if self.requests is not None:
            wait = max(wait, self.requests.bucket.wait_s(requests, now))
        if self.tokens is not None:
            wait = max(wait, self.tokens.bucket.wait_s(float(estimate.total), now))
        return wait

    def admits_now(self, estimate: TokenEstimate = NO_TOKENS, requests: float = 1.0) -> bool:
        """Whether ``admit`` would let a call of ``estimate`` go without waiting."""
        return self._wait_s(estimate, self._clock(), requests) <= 0

    async def admit(self, estimate: TokenEstimate = NO_TOKENS, requests: float = 1.0) -> Ticket:
        """Wait until the call fits every budget and the provider's reset; charge it.
        ``requests``: the requests it makes (a loglikelihood sample makes one per choice)."""
        wants = [
            (budget, amount)
            for budget, amount in (
                (self.requests, requests),
                (self.tokens, float(estimate.total)),
            )
            if budget is not None
        ]
        self.waiting += 1
        for budget, amount in wants:
            budget.waiting += amount
        try:
            while True:
                now = self._clock()
                wait = self._wait_s(estimate, now, requests)
                if wait <= 0:
                    break
                if self._budget_changed is None:
                    self._budget_changed = anyio.Event()
                with anyio.move_on_after(wait):  # or until a share moves
                    await self._budget_changed.wait()
        finally:
            self.waiting -= 1
            for budget, amount in wants:
                budget.waiting -= amount
        if self.requests is not None:
            self.requests.bucket.take(requests)
            self.requests.taken += requests
        if self.tokens is not None:
            self.tokens.bucket.take(float(estimate.total))
            self.tokens.taken += float(estimate.total)
        return Ticket(self.model_id, estimate, now, requests=requests)

    def set_shares(self, requests: float | None, tokens: float | None) -> None:
        """This replica's share of each budget (per minute), from a balancing; the calls
        waiting for budget look again at once."""
        now = self._clock()
        if self.requests is not None and requests is not None:
            self.requests.set_share(requests, now)
        if self.tokens is not None and tokens is not None:
            self.tokens.set_share(tokens, now)
        if self._budget_changed is not None:
            self._budget_changed.set()
            self._budget_changed = None

    def sending(self, ticket: Ticket) -> None:
        """The call holds its slots and goes out now: the time AIMD judges it by."""
        ticket.sent_at = self._clock()
        # Calls actually sent, in the order they went: a slot holder that has not sent
        # yet (a burst of waiters admitted at once) does not count for this one.
        self._sent += 1
        ticket.in_flight = self._sent
        ticket.at_limit = self._limit.in_use >= self._limit.capacity

    def finished(
        self, ticket: Ticket, outcome: SubtaskOutcome | None, info: RateLimitInfo | None
    ) -> None:
        """After the call: correct the token charge, read the headers, move AIMD. Called
        while the call still holds its model slot (a decrease must apply before the slot
        can go to the next call); a second call for the same ticket does nothing."""
        if ticket.settled:
            return
        ticket.settled = True
        if ticket.in_flight:
            self._sent -= 1
        now = self._clock()
        if info is not None:
            self._read_headers(info, ticket.estimated_tokens, now)
        if outcome is None or not outcome.attempted:
            self._refund(ticket, now)  # never reached the provider
            return
        if outcome.rate_limited:
            # No refund: the provider says evald is ahead of its bucket; keeping the
            # charge slows the next call rather than sending it straight into a 429.
            self.rate_limited += 1
            if self.aimd is not None and self.aimd.on_rate_limited(
                ticket.sent_at, now, ticket.in_flight or None
            ):
                self._limit.set_capacity(self.aimd.capacity)
                self._limit.episodes = self.aimd.episodes
            return
        if outcome.kind is OutcomeKind.SUCCEEDED:
            took = now - ticket.sent_at
            self._answer_s = (
                took if self._answer_s is None else self._answer_s + 0.05 * (took - self._answer_s)
            )
            self._correct(ticket, outcome, now)
            # Only a call sent with the limit full tests it: the limit of a model
            # that cannot fill it (too little work, a slower bottleneck) must not climb.
            if self.aimd is not None and ticket.at_limit:
                self.aimd.on_success(ticket.sent_at, now, self.replicas)
                self._limit.set_capacity(self.aimd.capacity)

    async def hold_rate_limited(self, ticket: Ticket) -> None:
        """A call answered 429 keeps its slot until a mean answer's time after it was
        sent. A provider that is full answers 429 at once, and the slot handed straight
        on would send the next call into it at once: a replica (or a model whose
        capacity other clients take) would probe a full provider as fast as it answers
        429s, not as fast as it frees places (measured: bench_replica_rates X2)."""
        if self._answer_s is not None:
            wait = ticket.sent_at + self._answer_s - self._clock()
            if wait > 0:
                await anyio.sleep(wait)

    def _refund(self, ticket: Ticket, now: float) -> None:
        if self.requests is not None:
            self.requests.bucket.give_back(ticket.requests, now)
        if self.tokens is not None:
            self.tokens.bucket.give_back(float(ticket.estimated_tokens), now)

    def _correct(self, ticket: Ticket, outcome: SubtaskOutcome, now: float) -> None:
        if outcome.completion_tokens is not None:
            self._answers += 1
            weight = 1.0 / min(self._answers, 50)  # a running mean, then a moving one
            self._completion_mean += weight * (outcome.completion_tokens - self._completion_mean)
        if self.tokens is None or outcome.prompt_tokens is None:
            return
        estimate = ticket.estimate
        used = outcome.prompt_tokens + estimate.completion
        if not estimate.bounded and outcome.completion_tokens is not None:
            used += outcome.completion_tokens - estimate.completion
        surplus = estimate.total - used
        if surplus > 0:
            self.tokens.bucket.give_back(float(surplus), now)
        else:
            self.tokens.bucket.take(float(-surplus))

    def _read_headers(self, info: RateLimitInfo, tokens_needed: int, now: float) -> None:
        # A limit the provider states and the config does not becomes the budget.
        if self.requests is None and info.limit_requests:
            self.requests = self._learned(info.limit_requests, info.remaining_requests, now)
        if self.tokens is None and info.limit_tokens:
            self.tokens = self._learned(info.limit_tokens, info.remaining_tokens, now)
        waits = [info.requests_wait_s(), info.tokens_wait_s(float(tokens_needed))]
        longest = max((w for w in waits if w is not None), default=None)
        if longest is not None and longest > 0:
            self._held_until = max(self._held_until, now + longest)

    def _learned(self, limit: float, remaining: float | None, now: float) -> Budget:
        self.learned = True
        budget = Budget(limit, self.settings.burst_s, now, 0.0 if self.shared else limit)
        budget.bucket.level = min(budget.bucket.capacity, remaining or 0.0)
        return budget

    def peers_published(self, replicas: int, concurrency: int, episodes: int) -> None:
        """The other live replicas' figures for this model, from a balancing."""
        more_episodes = episodes > self.peer_episodes and replicas > 1
        self.replicas = replicas
        self.peer_concurrency = concurrency
        self.peer_episodes = episodes
        if more_episodes and self.aimd is not None:
            self.aimd.on_peer_episodes(self._clock())
            self._limit.set_capacity(self.aimd.capacity)

    def stats(self) -> RateStats:
        aimd = self.aimd
        return RateStats(
            model_id=self.model_id,
            adaptive=aimd is not None,
            concurrency=self.concurrency,
            min_concurrency=self._limit.min_capacity,
            max_concurrency=self._limit.max_capacity,
            slow_start=aimd is not None and aimd.slow_start,
            episodes=0 if aimd is None else aimd.episodes,
            rate_limited=self.rate_limited,
            waiting=self.waiting,
            held_until_s=max(0.0, self._held_until - self._clock()),
            requests_per_minute=None if self.requests is None else self.requests.in_force,
            tokens_per_minute=None if self.tokens is None else self.tokens.in_force,
            learned=self.learned,
            replicas=self.replicas,
            replicas_concurrency=self.concurrency + self.peer_concurrency,
            replicas_episodes=(0 if aimd is None else aimd.episodes) + self.peer_episodes,
            requests_share=None if self.requests is None else self.requests.share,
            tokens_share=None if self.tokens is None else self.tokens.share,
        )


class RateControl:
    """Every model's rate control; models without settings get header reading only."""

    def __init__(
        self,
        limiter: Limiter,
        settings: Mapping[str, RateSettings],
        model_ids: Iterable[str],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.models = {
            model_id: ModelRateControl(
                model_id,
                settings.get(model_id)
                or RateSettings(max_concurrency=limiter.model(model_id).capacity),
                limiter.model(model_id),
                clock,
            )
            for model_id in model_ids
        }

    def model(self, model_id: str) -> ModelRateControl:
        return self.models[model_id]

    def stats(self) -> list[RateStats]:
        return [control.stats() for control in self.models.values()]

"""A simulated OpenAI-compatible LLM backend fleet: N backends on N ports, one event loop.

Each backend has a finite LRU prompt-block cache, prefill time proportional to the prompt
tokens it did not find in the cache, streamed decode at a set rate, a bounded number of
running sequences (FIFO queue beyond) and run-time fault injection. See
:mod:`~sluiceway.bench.simulated_engine` for the timing model,
:mod:`~sluiceway.bench.simulated_cache` for the cache and
:mod:`~sluiceway.bench.simulated_app` for the routes.

Command line (``sluiceway simulate`` or ``python -m sluiceway.bench.simulated``)::

    sluiceway simulate --backends 8 --base-port 9100 --prefill-us-per-token 200 \\
        --overhead-ms 5 --decode-tps 50 --max-seqs 8 --cache-blocks 512 --block-tokens 16

Faults at start: ``--fault oom --fault-backends 0,3 --fault-rate 0.5``. At run time::

    curl -X POST 127.0.0.1:9100/_fault -d '{"mode": "slow", "delay_ms": 2000}'
    curl -X POST 127.0.0.1:9100/_fault -d '{"mode": "refuse", "duration_s": 10}'

``refuse`` really stops listening (new connections get ECONNREFUSED) and drops the open ones,
so a backend in that mode cannot hear ``/_fault`` any more: give ``duration_s``, or restore it
through the fleet's control port (``--control-port``: ``POST /backends/{i}/_fault``).

Programmatic use (tests, benchmarks)::

    async with SimulatedFleet(EngineSettings(), backends=2) as fleet:
        url = fleet.backends[0].url
        await fleet.backends[1].set_fault(Fault("refuse"))
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from types import TracebackType

import msgspec
from aiohttp import web

from sluiceway.bench.simulated_app import make_app
from sluiceway.bench.simulated_engine import (
    FAULT_MODES,
    EngineSettings,
    Fault,
    SimulatedEngine,
)
from sluiceway.errors import InvalidRequest

_Spawn = Callable[[Coroutine[None, None, None]], None]


class SimulatedBackend:
    """One simulated backend: an engine, its aiohttp app, and a listening site it can close."""

    def __init__(self, engine: SimulatedEngine, host: str, port: int, spawn: _Spawn) -> None:
        self.engine = engine
        self.host = host
        self.port = port
        self._spawn = spawn
        self._runner = web.AppRunner(
            make_app(engine, self), handler_cancellation=True, shutdown_timeout=0.5
        )
        self._site: web.TCPSite | None = None
        self._generation = 0  # bumps on every set_fault, so a stale auto-revert is ignored

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def listening(self) -> bool:
        return self._site is not None

    async def start(self) -> None:
        await self._runner.setup()
        await self._listen()

    async def _listen(self) -> None:
        if self._site is not None:
            return
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self._site = site
        if self.port == 0:
            self.port = self._runner.addresses[-1][1]

    async def _refuse(self) -> None:
        if self._site is not None:
            site, self._site = self._site, None
            await site.stop()
        server = self._runner.server
        if server is not None:  # a dead process drops its connections too
            for conn in server.connections:
                conn.force_close()

    async def set_fault(self, fault: Fault) -> None:
        """Switch to ``fault`` (``none`` restores normal service and listening)."""
        self._generation += 1
        self.engine.fault = fault
        if fault.mode == "refuse":
            await self._refuse()
        else:
            await self._listen()
        if fault.duration_s is not None and fault.mode != "none":
            self._spawn(self._revert(self._generation, fault.duration_s))

    async def _revert(self, generation: int, after: float) -> None:
        await asyncio.sleep(after)
        if generation == self._generation:
            await self.set_fault(Fault())

    async def close(self) -> None:
        self._site = None
        await self._runner.cleanup()

    def statistics(self) -> dict[str, object]:
        return {"url": self.url, "listening": self.listening, **self.engine.statistics()}

    def __repr__(self) -> str:
        return f"SimulatedBackend({self.url}, listening={self.listening}, {self.engine!r})"


class SimulatedFleet:
    """``backends`` simulated backends on consecutive ports (``base_port`` 0: ephemeral ports).

    An async context manager: entering starts every backend (and the optional control site),
    leaving stops them and cancels pending fault reverts.
    """

    def __init__(
        self,
        settings: EngineSettings,
        backends: int = 1,
        *,
        host: str = "127.0.0.1",
        base_port: int = 0,
        control_port: int | None = None,
        seed: int = 0,
    ) -> None:
        if backends < 1:
            raise InvalidRequest("a fleet needs at least one backend")
        self.settings = settings
        self.host = host
        self._count = backends
        self._base_port = base_port
        self._control_port = control_port
        self._seed = seed
        self.backends: list[SimulatedBackend] = []
        self._pending: set[asyncio.Task[None]] = set()  # fault reverts, owned here
        self._control: web.AppRunner | None = None

    async def __aenter__(self) -> SimulatedFleet:
        try:
            for i in range(self._count):
                port = self._base_port + i if self._base_port else 0
                engine = SimulatedEngine(self.settings, seed=self._seed + i)
                backend = SimulatedBackend(engine, self.host, port, self._spawn)
                self.backends.append(backend)
                await backend.start()
            if self._control_port is not None:
                self._control = web.AppRunner(self._control_app())
                await self._control.setup()
                await web.TCPSite(self._control, self.host, self._control_port).start()
                self._control_port = self._control.addresses[0][1]
        except BaseException:
            await self.__aexit__(*sys.exc_info())
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # End the revert timers first (they could reopen a site), then stop serving.
        pending, self._pending = self._pending, set()
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._control is not None:
            await self._control.cleanup()
        for backend in self.backends:
            await backend.close()

    def _spawn(self, coro: Coroutine[None, None, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    @property
    def control_url(self) -> str | None:
        """The control site's URL, when the fleet has one."""
        if self._control is None:
            return None
        return f"http://{self.host}:{self._control_port}"

    @property
    def urls(self) -> list[str]:
        return [b.url for b in self.backends]

    def _control_app(self) -> web.Application:
        async def list_backends(request: web.Request) -> web.Response:
            doc = self.statistics()
            return web.Response(body=msgspec.json.encode(doc), content_type="application/json")

        async def fault(request: web.Request) -> web.Response:
            index = int(request.match_info["index"])
            if not 0 <= index < len(self.backends):
                return web.json_response({"error": {"message": "no such backend"}}, status=404)
            try:
                value = msgspec.json.decode(await request.read(), type=Fault)
            except (msgspec.DecodeError, msgspec.ValidationError, InvalidRequest) as exc:
                return web.json_response({"error": {"message": str(exc)}}, status=400)
            await self.backends[index].set_fault(value)
            return web.json_response(value.to_dict())

        app = web.Application()
        app.router.add_get("/backends", list_backends)
        app.router.add_post(r"/backends/{index:\d+}/_fault", fault)
        return app

    def statistics(self) -> list[dict[str, object]]:
        """Every backend's statistics, in port order."""
        return [b.statistics() for b in self.backends]

    def __repr__(self) -> str:
        return f"SimulatedFleet({len(self.backends)} backends: {', '.join(self.urls)})"


# ---------------------------------------------------------------------------- command line


def _indices(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated indices, got {text!r}"
        ) from None


def _add_arguments(p: argparse.ArgumentParser) -> None:
    d = EngineSettings()
    p.add_argument("--backends", type=int, default=1, help="number of backends (default 1)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--base-port", type=int, default=9100, help="first port (default 9100)")
    p.add_argument("--control-port", type=int, help="fleet control port (optional)")
    p.add_argument("--model", default=d.model, help=f"model name listed (default {d.model})")
    p.add_argument("--prefill-us-per-token", type=float, default=d.prefill_us_per_token)
    p.add_argument("--overhead-ms", type=float, default=d.overhead_ms)
    p.add_argument("--decode-tps", type=float, default=d.decode_tps, help="0 = no decode delay")
    p.add_argument("--max-seqs", type=int, default=d.max_seqs)
    p.add_argument("--prefill-concurrency", type=int, default=d.prefill_concurrency)
    p.add_argument("--cache-blocks", type=int, default=d.cache_blocks)
    p.add_argument("--block-tokens", type=int, default=d.block_tokens)
    p.add_argument("--default-max-tokens", type=int, default=d.default_max_tokens)
    p.add_argument("--fault", choices=FAULT_MODES, default="none", help="fault at start")
    p.add_argument("--fault-backends", type=_indices, help="indices the fault applies to (all)")
    p.add_argument("--fault-rate", type=float, default=1.0)
    p.add_argument("--fault-delay-ms", type=float, default=1000.0)
    p.add_argument("--fault-after-chunks", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)


async def serve_fleet(args: argparse.Namespace) -> None:
    """Run a fleet until SIGINT/SIGTERM."""
    settings = EngineSettings(
        prefill_us_per_token=args.prefill_us_per_token,
        overhead_ms=args.overhead_ms,
        decode_tps=args.decode_tps,
        max_seqs=args.max_seqs,
        prefill_concurrency=args.prefill_concurrency,
        cache_blocks=args.cache_blocks,
        block_tokens=args.block_tokens,
        default_max_tokens=args.default_max_tokens,
        model=args.model,
    )
    fault = Fault(
        args.fault,
        rate=args.fault_rate,
        delay_ms=args.fault_delay_ms,
        after_chunks=args.fault_after_chunks,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with SimulatedFleet(
        settings,
        args.backends,
        host=args.host,
        base_port=args.base_port,
        control_port=args.control_port,
        seed=args.seed,
    ) as fleet:
        if fault.mode != "none":
            for i in args.fault_backends or range(len(fleet.backends)):
                await fleet.backends[i].set_fault(fault)
        print(f"simulate: {len(fleet.backends)} backends: {' '.join(fleet.urls)}", flush=True)
        await stop.wait()


def _run(args: argparse.Namespace) -> int:
    try:
        import uvloop

        uvloop.run(serve_fleet(args))
    except InvalidRequest as exc:
        print(f"sluiceway simulate: {exc.message}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sluiceway simulate: {exc}", file=sys.stderr)
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``simulate`` sub-command to the main CLI."""
    p = subparsers.add_parser(
        "simulate",
        help="run simulated OpenAI-compatible LLM backends (prefix cache, faults)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(p)
    p.set_defaults(func=_run)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sluiceway.bench.simulated [options]`` (same options as ``simulate``)."""
    parser = argparse.ArgumentParser(prog="sluiceway simulate", description=__doc__)
    _add_arguments(parser)
    return _run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())

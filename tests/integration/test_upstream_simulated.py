"""The upstream provider against the simulated LLM fleet (sluiceway.bench.simulated)."""

from __future__ import annotations

import openai
import pytest
from upstream_backends import gateway_backends, pool_settings, settled, until

from sluiceway.app import Gateway
from sluiceway.bench.simulated import SimulatedFleet
from sluiceway.bench.simulated_engine import EngineSettings, Fault
from sluiceway.config.upstream import HealthSettings
from sluiceway.testing import running_gateway, settings

pytestmark = pytest.mark.anyio

FAST = EngineSettings(prefill_us_per_token=0, overhead_ms=0, decode_tps=0, model="llm")


async def test_a_conversation_stays_on_one_simulated_backend_and_hits_its_cache() -> None:
    async with SimulatedFleet(FAST, backends=3) as fleet:
        gw = Gateway(settings((pool_settings(*fleet.urls),)))
        async with (
            running_gateway(gw),
            openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="k", max_retries=0) as c,
        ):
            messages = [
                {"role": "system", "content": "You are a patient tutor. " * 20},
                {"role": "user", "content": "Explain photosynthesis in detail please."},
            ]
            for turn in range(4):
                stream = await c.chat.completions.create(
                    model="llm", messages=messages, stream=True, max_tokens=8
                )
                text = "".join([ch.choices[0].delta.content or "" async for ch in stream])
                messages += [
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": f"And then? ({turn})"},
                ]
            served = [b.engine.counters.requests for b in fleet.backends]
            assert sorted(served) == [0, 0, 4]
            busy = fleet.backends[served.index(4)].engine.counters
            assert busy.cached_tokens > 0
            await settled(gw)


async def test_refused_and_oom_backends_are_avoided() -> None:
    async with SimulatedFleet(FAST, backends=2) as fleet:
        health = HealthSettings(interval_s=0.05, timeout_s=0.5)
        gw = Gateway(settings((pool_settings(*fleet.urls, health=health),)))
        async with (
            running_gateway(gw),
            openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key="k", max_retries=0) as c,
        ):
            await fleet.backends[0].set_fault(Fault("oom"))
            for i in range(6):
                r = await c.chat.completions.create(
                    model="llm", messages=[{"role": "user", "content": f"q{i}"}], max_tokens=4
                )
                assert r.choices[0].message.content
            await fleet.backends[0].set_fault(Fault("refuse"))
            await until(lambda: not gateway_backends(gw)[0]["healthy"])
            for i in range(6):
                r = await c.chat.completions.create(
                    model="llm", messages=[{"role": "user", "content": f"r{i}"}], max_tokens=4
                )
                assert r.choices[0].message.content
            await fleet.backends[0].set_fault(Fault())
            await until(lambda: bool(gateway_backends(gw)[0]["healthy"]))
            await settled(gw)

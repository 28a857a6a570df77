"""How a model's slots, lanes and threads are laid out on the machine's cores."""

from __future__ import annotations

from sluiceway.config.llm import LlamaModelSettings
from sluiceway.providers.generation import layout


def settings(**kw: int) -> LlamaModelSettings:
    return LlamaModelSettings(id="m", gguf="x.gguf", **kw)  # type: ignore[arg-type]


def test_auto_uses_one_thread_per_lane_on_small_machines() -> None:
    assert layout(settings(slots=4), cores=2) == (1, 2, 2)
    assert layout(settings(slots=4), cores=1) == (1, 1, 4)


def test_auto_on_bigger_machines() -> None:
    assert layout(settings(slots=8), cores=8) == (4, 2, 4)


def test_explicit_values_win_and_slots_round_up_to_the_lanes() -> None:
    assert layout(settings(slots=3, n_threads=2, lanes=2), cores=2) == (2, 2, 2)
    assert layout(settings(slots=1, lanes=4), cores=8) == (4, 1, 1)

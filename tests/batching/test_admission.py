import pytest

from sluiceway.batching.admission import Admission
from sluiceway.errors import Overloaded


def test_items_bound_refuses_with_retry_after() -> None:
    a = Admission(max_items=10, max_tokens=1000)
    a.reserve_items(8)
    with pytest.raises(Overloaded) as err:
        a.reserve_items(3)
    assert err.value.status == 429 and err.value.retry_after > 0
    a.reserve_items(2)
    assert a.items == 10


def test_tokens_bound_and_release() -> None:
    a = Admission(max_items=10, max_tokens=100)
    a.reserve_tokens(90)
    with pytest.raises(Overloaded):
        a.reserve_tokens(20)
    a.release(0, 90)
    a.reserve_tokens(20)
    assert a.statistics() == {"items": 0, "tokens": 20, "refused": 1}


def test_an_empty_queue_admits_one_request_larger_than_the_bound() -> None:
    a = Admission(max_items=4, max_tokens=10)
    a.reserve_items(6)
    a.reserve_tokens(50)
    assert a.items == 6

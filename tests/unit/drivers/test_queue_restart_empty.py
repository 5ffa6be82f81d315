"""A queue whose registry is empty still restarts (an empty space is falsy)."""

from queuebox.drivers.queue import Queue
from queuebox.storage.catalog import Catalog


def test_restart_over_an_empty_registry() -> None:
    catalog = Catalog()
    Queue(catalog, lambda: 1_000_000)
    again = Queue(catalog, lambda: 2_000_000)
    assert again.call(1, "queue.tube", []) == [[]]

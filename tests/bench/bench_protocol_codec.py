"""Prints the codec's hot-path speed; not a test (no timing assertions anywhere).

    cd /work/main && python tests/unit/protocol/bench_protocol_codec.py

Decodes the CALL frame asynctnt sends for queue.tube.q1:put('data') and
encodes the reply with a task tuple, fed one frame per feed() and in
pipelined batches, and reports requests per second on one core. The
reference line (bare msgpack on the same body) helps compare runs made on
busy machines.
"""

from __future__ import annotations

import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import msgpack  # noqa: E402

from queuebox.protocol import RequestDecoder, encode_data, encode_ok  # noqa: E402

CALL = bytes.fromhex("ce0000002082000a01148222b171756575652e747562652e71313a7075742191a464617461")
TASK = (0, "r", "data")


def best(fn: object, number: int) -> float:
    # CPU time, not wall time: the numbers stay meaningful on a shared box.
    timer = timeit.Timer(fn, timer=time.process_time)  # type: ignore[arg-type]
    return min(timer.repeat(number=number, repeat=7)) / number


def main() -> None:
    decoder = RequestDecoder()
    for batch in (1, 16, 64):
        data = CALL * batch
        n = max(20_000 // batch, 200)

        def decode_only(data: bytes = data) -> None:
            decoder.feed(data)

        def round_trip(data: bytes = data) -> None:
            for request in decoder.feed(data):
                encode_data(request.sync, 81, [TASK])  # type: ignore[union-attr]

        dec = best(decode_only, n) / batch
        both = best(round_trip, n) / batch
        print(
            f"batch {batch:3d}: decode {dec * 1e9:6.0f} ns  "
            f"decode+encode {both * 1e9:6.0f} ns  = {1 / both:9,.0f} CALL/s per core"
        )
    payload = CALL[5:]
    floor = best(lambda: msgpack.packb(msgpack.unpackb(payload[5:], strict_map_key=False)), 50_000)
    print(f"reference: bare msgpack unpackb(body)+packb(body) {floor * 1e9:.0f} ns")
    enc = best(lambda: encode_data(123456, 81, [TASK]), 100_000)
    ok = best(lambda: encode_ok(123456, 81), 100_000)
    print(f"encode_data([task]) {enc * 1e9:.0f} ns, encode_ok() {ok * 1e9:.0f} ns")


if __name__ == "__main__":
    main()

"""What a %%remote message costs on Monarch's wire: NamedTuples by value versus plain tuples.

    .venv/bin/python benchmarks/bench_wire.py [--n 300]

Workers need only torchmonarch, so the kernel pickles our remote modules by value
(``engines.send_by_value``), :mod:`monarch_jupyter.remote.wire.protocol` among them. A NamedTuple
of that module then carries its class's whole definition in every message. This prints, per
form (``named``: the NamedTuple as it is; ``wire``: :func:`~monarch_jupyter.remote.wire.protocol.encode`),
the pickled size and the cloudpickle dumps + loads time of an :class:`Exit` and a
:class:`RunSpec`, and the round trip of a run's shape on 2 local procs: broadcast a
spec to both, each answers an Exit on a port, until both arrived. Then how the kernel's loop
receives from a port (a message sent on it and awaited, one at a time): the public
``receiver.recv().as_asyncio()`` against :class:`monarch_jupyter.runtime.introspect.PortReader`.
Medians in µs. The procs are stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import statistics
import time

import cloudpickle
from monarch.actor import Actor, Channel, endpoint, this_host

from monarch_jupyter.remote.wire import protocol
from monarch_jupyter.remote.wire.protocol import Chunk, Exit, RunSpec
from monarch_jupyter.runtime.introspect import PortReader

cloudpickle.register_pickle_by_value(protocol)  # as in a kernel that started remote actors

SPEC = RunSpec(
    "bash", "true", {}, None, "/home/user/project", None, {"context": "default", "target": "hosts"}
)
EXIT = Exit("20261201-030000-abcdef", "hosts", 1, 4242, [Chunk("out", "hi\n", 1)], 0, 0.002, None)


class Echo(Actor):
    @endpoint
    async def ping(self) -> None:
        return None

    @endpoint
    async def run(self, form: str, spec: object, port: object) -> None:
        if form == "wire":
            spec = protocol.spec_from_wire(spec)
            port.send(protocol.encode(EXIT))
        else:
            port.send(EXIT)


def micro(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e6:7.0f} µs"


def pickling(n: int) -> None:
    for name, named, wire in (
        ("Exit", EXIT, protocol.encode(EXIT)),
        ("RunSpec", SPEC, protocol.spec_to_wire(SPEC)),
    ):
        for form, value in (("named", named), ("wire", wire)):
            data = cloudpickle.dumps(value)
            times = []
            for _ in range(n):
                start = time.perf_counter()
                pickle.loads(cloudpickle.dumps(value))
                times.append(time.perf_counter() - start)
            print(f"  {name:8s} {form:6s} {len(data):6d} bytes  dumps + loads {micro(times)}")


async def round_trips(n: int) -> None:
    procs = this_host().spawn_procs(per_host={"gpus": 2})
    try:
        actors = procs.spawn("echo", Echo)
        await actors.ping.call()
        for form in ("named", "wire", "named", "wire"):  # twice each, alternated
            spec = SPEC if form == "named" else protocol.spec_to_wire(SPEC)
            times = []
            for _ in range(n):
                port, receiver = Channel.open()
                start = time.perf_counter()
                actors.run.broadcast(form, spec, port)
                for _ in range(2):
                    message = await receiver.recv()
                    if form == "wire":
                        message = protocol.decode(message)
                times.append(time.perf_counter() - start)
            assert type(message) is Exit
            print(f"  {form:6s} broadcast → 2 Exits {micro(times[n // 10 :])}")
    finally:
        await procs.stop()


async def receiving(n: int) -> None:
    for how in ("recv().as_asyncio()", "PortReader", "recv().as_asyncio()", "PortReader"):  # alternated
        port, receiver = Channel.open()
        reader = PortReader(receiver)
        times = []
        for i in range(n):
            start = time.perf_counter()
            port.send(i)
            if how == "PortReader":
                value = reader.value(await reader.next())
            else:
                value = await receiver.recv().as_asyncio()
            times.append(time.perf_counter() - start)
            assert value == i
        print(f"  {how:20s} send + receive {micro(times[n // 10 :])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    opts = parser.parse_args()
    print("pickling (this process):")
    pickling(opts.n)
    print("round trip on 2 local procs:")
    asyncio.run(round_trips(opts.n))
    print("receiving on the loop (this process):")
    asyncio.run(receiving(opts.n * 3))


if __name__ == "__main__":
    main()

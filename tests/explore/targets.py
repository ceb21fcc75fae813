"""Small explore targets for the command's own checks: one that always fails, one that never lets go of
simulated time, one that spins without letting time pass, one that unbalances a pool's books, one whose
call the real engine never returns from."""

from __future__ import annotations

from datadist_sim import SimWorld


def always_fails(world: SimWorld) -> None:
    raise AssertionError("the property never holds")


def sleeps_forever(world: SimWorld) -> None:
    while True:
        world.clock.sleep(1.0)


def backs_off_forever(world: SimWorld) -> None:
    """A client whose retry loop sleeps with ``time.sleep`` on simulated time (``patch_time``)."""
    import time

    from datadist_sim.timepatch import patch_time

    with patch_time(world):
        while True:
            time.sleep(5.0)


def spins(world: SimWorld) -> None:
    while True:
        world.now()


def unbalances_a_pool(world: SimWorld) -> None:
    import llm_datadist
    from tests.explore.clients import _options

    dd = llm_datadist.LLMDataDist(llm_datadist.LLMRole.PROMPT, 7)
    dd.init(_options())
    pool = world.caches[7].device_pool
    assert pool is not None
    pool._used += 1  # what a bookkeeping bug in the world would look like


def passes(world: SimWorld) -> None:
    """Touches nothing: every run passes."""


def blocks_on_a_socket(world: SimWorld) -> None:
    """A connector whose Decode waits on its listener thread, which blocks on a socket read no one
    answers: both wait outside the simulated clock, and the thread is not a daemon."""
    import socket
    import threading

    mine, theirs = socket.socketpair()
    _held.append((mine, theirs))

    def listen() -> None:
        mine.recv(1)  # never answered

    listener = threading.Thread(target=listen, name="listener")
    listener.start()
    listener.join()


_held: list = []
"""The sockets stay open (a closed one would end the read)."""


def unlinks_a_peer_hung_for_good(world: SimWorld) -> None:
    """A hixl-backend Decoder unlinks a Prompt that a hang holds for good: the real call never returns."""
    from tests.fabric.test_hixl_backend import hixl_pair, to_prompt

    from datadist_sim import Fault

    _, decoder = hixl_pair()
    decoder.link_clusters([to_prompt()])
    world.faults.add(Fault.hang(0))
    decoder.unlink_clusters([to_prompt()], 1000)

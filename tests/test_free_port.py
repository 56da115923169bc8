"""Listening ports (rbl/backends/net.py): picked below the kernel's ephemeral range, where no
outgoing connection can take one between the pick and the service's bind."""

from __future__ import annotations

import socket

from rbl.backends import net


def test_a_listening_port_is_free_and_below_the_ephemeral_range(monkeypatch, tmp_path):
    start = net._ephemeral_start()
    ports = {net.free_port() for _ in range(20)}
    if start > net.LOWEST_LISTEN_PORT + 1000:
        assert all(net.LOWEST_LISTEN_PORT <= port < start for port in ports), (ports, start)
    assert len(ports) > 10                                 # random: parallel runs pick apart
    port = ports.pop()
    with socket.socket() as sock:
        sock.bind((net.HOST, port))                        # free when handed out
    # a machine whose range leaves no room below it: the kernel's pick
    (tmp_path / "range").write_text("1024\t65000\n")
    monkeypatch.setattr(net, "EPHEMERAL_RANGE", tmp_path / "range")
    assert net.free_port() >= 1024
    monkeypatch.setattr(net, "EPHEMERAL_RANGE", tmp_path / "missing")
    assert net._ephemeral_start() == 0 and net.free_port() > 0


def test_a_taken_port_is_never_handed_out(monkeypatch):
    taken = socket.socket()
    taken.bind((net.HOST, 0))
    taken.listen()
    try:
        picks = iter([taken.getsockname()[1]] * 3 + [net.LOWEST_LISTEN_PORT + 7])
        monkeypatch.setattr(net, "_HANDED_OUT", set())
        monkeypatch.setattr(net, "_ephemeral_start", lambda: 60000)
        monkeypatch.setattr(net._PICKER, "randrange", lambda low, high: next(picks))
        assert net.free_port() == net.LOWEST_LISTEN_PORT + 7
    finally:
        taken.close()


def test_a_port_handed_out_once_is_not_handed_out_again_before_anything_binds_it(monkeypatch):
    """Two picks before either service binds (a sidecar and a second target replica, say) must not get
    one port: the one binding second would die with "address already in use"."""
    monkeypatch.setattr(net, "_HANDED_OUT", set())
    first = net.free_port()
    picks = iter([first, first, net.LOWEST_LISTEN_PORT + 11])
    monkeypatch.setattr(net, "_ephemeral_start", lambda: 60000)
    monkeypatch.setattr(net._PICKER, "randrange", lambda low, high: next(picks))
    assert net.free_port() == net.LOWEST_LISTEN_PORT + 11


def test_many_picks_in_one_process_are_all_distinct(monkeypatch):
    monkeypatch.setattr(net, "_HANDED_OUT", set())
    ports = [net.free_port() for _ in range(3000)]     # ~12,700 ports below the ephemeral range here
    assert len(set(ports)) == len(ports)

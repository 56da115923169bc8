"""scripts/k8s-e2e.sh's own bookkeeping of the host, without a cluster: the functions that start
and stop a Docker engine of the script's own, take back what it leaves, and compare the host with
its state before (host_changes), run by bash on a fake host. iptables, ip6tables, ip, sysctl,
dockerd, docker, pgrep, pkill and findmnt are stand-ins on PATH that keep the host in files; the
fake dockerd changes it as a real one does on a machine where Docker never ran (the chains, rules
and policy below were read from a real engine), and leaves those changes when it stops.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from .conftest import REPO

SCRIPT = REPO / "scripts" / "k8s-e2e.sh"

# iptables -S of a machine where Docker never ran
CLEAN = {
    "filter": ["-P INPUT ACCEPT", "-P FORWARD ACCEPT", "-P OUTPUT ACCEPT"],
    "nat": ["-P PREROUTING ACCEPT", "-P INPUT ACCEPT", "-P OUTPUT ACCEPT", "-P POSTROUTING ACCEPT"],
    "mangle": ["-P PREROUTING ACCEPT", "-P INPUT ACCEPT", "-P FORWARD ACCEPT", "-P OUTPUT ACCEPT",
               "-P POSTROUTING ACCEPT"],
    "raw": ["-P PREROUTING ACCEPT", "-P OUTPUT ACCEPT"],
}
# ... and what a Docker engine (20.10-27) left there once stopped
DOCKER = {
    "filter": ["-P INPUT ACCEPT", "-P FORWARD DROP", "-P OUTPUT ACCEPT", "-N DOCKER", "-N DOCKER-ISOLATION-STAGE-1",
               "-N DOCKER-ISOLATION-STAGE-2", "-N DOCKER-USER", "-A FORWARD -j DOCKER-USER",
               "-A FORWARD -j DOCKER-ISOLATION-STAGE-1",
               "-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
               "-A FORWARD -o docker0 -j DOCKER", "-A FORWARD -i docker0 ! -o docker0 -j ACCEPT",
               "-A FORWARD -i docker0 -o docker0 -j ACCEPT",
               "-A DOCKER-ISOLATION-STAGE-1 -i docker0 ! -o docker0 -j DOCKER-ISOLATION-STAGE-2",
               "-A DOCKER-ISOLATION-STAGE-1 -j RETURN", "-A DOCKER-ISOLATION-STAGE-2 -o docker0 -j DROP",
               "-A DOCKER-ISOLATION-STAGE-2 -j RETURN", "-A DOCKER-USER -j RETURN"],
    "nat": ["-P PREROUTING ACCEPT", "-P INPUT ACCEPT", "-P OUTPUT ACCEPT", "-P POSTROUTING ACCEPT", "-N DOCKER",
            "-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER",
            "-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER",
            "-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE", "-A DOCKER -i docker0 -j RETURN"],
    "mangle": CLEAN["mangle"],
    "raw": CLEAN["raw"],
}

# The stand-ins are bash (a Python one costs ~50 ms a call, and the teardown makes hundreds).
IPTABLES = r'''#!/usr/bin/env bash
# iptables on files: -t TABLE with -S, -A, -D, -N, -F, -X or -P, as the script uses them
table=filter
if [ "$1" = -t ]; then table=$2; shift 2; fi
state="$FAKE_HOST/$(basename "$0").$table"
touch "$state"
quote() { local out=() a; for a in "$@"; do case $a in *" "*) out+=("\"$a\"") ;; *) out+=("$a") ;; esac; done
          printf '%s' "${out[*]}"; }
keep() { awk "$@" "$state" > "$state.new" && mv "$state.new" "$state"; }
command=$1; shift
case $command in
    -S) cat "$state" ;;
    -A) printf '%s\n' "-A $(quote "$@")" >> "$state" ;;
    -N) printf '%s\n' "-N $1" >> "$state" ;;
    -D) rule="-A $(quote "$@")"
        grep -qxF -- "$rule" "$state" || { echo "iptables: Bad rule (does a matching rule exist?)" >&2; exit 1; }
        keep -v r="$rule" '!gone && $0 == r {gone = 1; next} {print}' ;;
    -F) keep -v p="-A $1 " 'index($0, p) != 1' ;;
    -X) if grep -q -e "^-A $1 " -e " -j $1\$" "$state" || ! grep -qxF -- "-N $1" "$state"; then
            echo "iptables: Too many links." >&2; exit 1; fi
        keep -v c="-N $1" '$0 != c' ;;
    -P) keep -v c="$1" -v p="$2" '$1 == "-P" && $2 == c {$3 = p} {print}' ;;
esac
'''

IP = r'''#!/usr/bin/env bash
# ip -o link show, ip link show NAME, ip link del NAME on a file of link names
state="$FAKE_HOST/links"
read -ra links <<< "$(tr '\n' ' ' < "$state")"
if [ "$*" = "-o link show" ]; then
    n=0; for link in "${links[@]}"; do n=$((n + 1)); echo "$n: $link: <BROADCAST,MULTICAST,UP> mtu 1500 state UP"; done
elif [ "$1 $2" = "link show" ]; then
    [[ " ${links[*]} " == *" $3 "* ]]
elif [ "$1 $2" = "link del" ]; then
    [[ " ${links[*]} " == *" $3 "* ]] || { echo "Cannot find device \"$3\"" >&2; exit 1; }
    kept=(); for link in "${links[@]}"; do [ "$link" = "$3" ] || kept+=("$link"); done
    echo "${kept[*]}" > "$state"
fi
'''

SYSCTL = r'''#!/usr/bin/env bash
# sysctl KEY... and sysctl -qw KEY=VALUE on a file of "key value" lines
state="$FAKE_HOST/sysctl"
if [ "$1" = -qw ]; then
    awk -v k="${2%%=*}" -v v="${2#*=}" '$1 == k {$2 = v} {print}' "$state" > "$state.new" && mv "$state.new" "$state"
    exit 0
fi
status=0
for key; do
    value=$(awk -v k="$key" '$1 == k {print $2}' "$state")
    if [ -n "$value" ]; then echo "$key = $value"
    else echo "sysctl: cannot stat /proc/sys/${key//.//}: No such file or directory" >&2; status=255; fi
done
exit $status
'''

# A Docker engine: on start, what a real one does to a host where Docker never ran (chains and
# rules added when missing, FORWARD's policy DROP, docker0, forwarding on); on SIGTERM it stops
# and leaves all of that, as dockerd does.
DOCKERD = r'''#!/usr/bin/env bash
docker_up() {
    local table line
    for table in filter nat; do
        while IFS= read -r line; do        # each line of `iptables -S` is also the command that makes it
            case $line in
                "-P FORWARD DROP") iptables -t "$table" -P FORWARD DROP ;;
                -P*) ;;
                *) iptables -t "$table" -S | grep -qxF -- "$line" || eval "iptables -t $table $line" ;;
            esac
        done < "$FAKE_HOST/docker.$table"
    done
    grep -qw docker0 "$FAKE_HOST/links" || printf ' docker0' >> "$FAKE_HOST/links"
    sysctl -qw net.ipv4.ip_forward=1
    touch "$FAKE_HOST/dockerd.running"
}
trap 'rm -f "$FAKE_HOST/dockerd.running"; exit 0' TERM
docker_up
sleep 60 & wait $!
'''

DOCKER_CLI = r'''#!/usr/bin/env bash
[ "$1" = info ] && [ -e "$FAKE_HOST/dockerd.running" ]
'''


def _fake_host(tmp_path: Path, iptables: dict, links: str = "lo eth0", forwarding: str = "0") -> dict:
    host, bin_dir = tmp_path / "host", tmp_path / "bin"
    host.mkdir()
    bin_dir.mkdir()
    for table, lines in iptables.items():
        for command in ("iptables", "ip6tables"):
            (host / f"{command}.{table}").write_text("".join(line + "\n" for line in lines))
    for table in ("filter", "nat"):          # what the fake dockerd adds, in its order
        (host / f"docker.{table}").write_text("".join(line + "\n" for line in DOCKER[table]))
    (host / "links").write_text(links)
    (host / "sysctl").write_text("vm.overcommit_memory 0\nkernel.panic 0\nkernel.panic_on_oops 0\n"
                                 f"net.ipv4.ip_forward {forwarding}\nnet.ipv6.conf.all.forwarding 0\n")
    scripts = {"iptables": IPTABLES, "ip6tables": IPTABLES, "ip": IP, "sysctl": SYSCTL, "dockerd": DOCKERD,
               "docker": DOCKER_CLI, "pgrep": "#!/bin/sh\nexit 1\n", "pkill": "#!/bin/sh\nexit 1\n",
               "findmnt": "#!/bin/sh\nexit 0\n"}
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_HOST": str(host),
            "RBL_K8S_DIR": str(tmp_path / "e2e")}


def _run(env: dict, steps: str) -> subprocess.CompletedProcess:
    """Source the script (its functions, under its own `set -euo pipefail`), then run `steps`."""
    # the paths and network namespaces the teardown would remove are this machine's own: none here
    program = (f'source {SCRIPT}\nmkdir -p "$B/logs"\nsnapshot_host\n: > "$B/paths.created"\n'
               f'rm "$B/netns.before"\n{textwrap.dedent(steps)}')
    return subprocess.run(["bash", "-c", program], env=env, capture_output=True, text=True, timeout=120)


def test_the_script_sources_without_running_anything(tmp_path):
    env = _fake_host(tmp_path, CLEAN)
    done = subprocess.run(["bash", "-c", f"source {SCRIPT}; declare -F undo_dockerd host_changes"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "e2e").exists()


def test_an_engine_the_script_started_leaves_the_host_as_it_was(tmp_path):
    """Docker never ran here: the engine's chains, rules, policy, bridge and forwarding go with it."""
    env = _fake_host(tmp_path, CLEAN)
    done = _run(env, """
        start_own_dockerd
        [ -f "$B/dockerd.pid" ] && docker info
        stop_own_dockerd
        echo "changes: [$(host_changes)]"
    """)
    assert done.returncode == 0, done.stderr
    assert "changes: []" in done.stdout, done.stdout
    host = Path(env["FAKE_HOST"])
    for table, lines in CLEAN.items():
        assert (host / f"iptables.{table}").read_text().splitlines() == lines
    assert (host / "links").read_text().split() == ["lo", "eth0"]
    assert "net.ipv4.ip_forward 0" in (host / "sysctl").read_text().splitlines()
    assert not (tmp_path / "e2e" / "docker.before").exists()       # taken back once, and forgotten


def test_without_taking_it_back_the_comparison_sees_what_the_engine_left(tmp_path):
    """The comparison itself is what failed on such a machine: it must still see the engine's
    leftovers when they stay (here: the engine is stopped, nothing is taken back)."""
    env = _fake_host(tmp_path, CLEAN)
    done = _run(env, """
        start_own_dockerd
        stop dockerd
        host_changes
    """)
    assert done.returncode == 0, done.stderr
    for leftover in ("iptables -t filter: > -N DOCKER-USER", "iptables -t filter: > -P FORWARD DROP",
                     "iptables -t nat: > -A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE",
                     "link docker0 was not there before", "> net.ipv4.ip_forward 1"):
        assert leftover in done.stdout, done.stdout


def test_a_leak_after_the_engine_stopped_is_still_reported(tmp_path):
    """What the cluster leaves (here a kubelet chain, forwarding on and a docker0 bridge made after
    the engine stopped) is never taken for the engine's: the final comparison names all of it."""
    env = _fake_host(tmp_path, CLEAN)
    done = _run(env, """
        start_own_dockerd
        stop_own_dockerd
        iptables -t filter -N KUBE-FIREWALL
        iptables -t filter -A INPUT -m comment --comment "kubernetes firewall" -j KUBE-FIREWALL
        sysctl -qw net.ipv4.ip_forward=1
        printf ' docker0' >> "$FAKE_HOST/links"
        undo_dockerd                       # a second call takes nothing back
        host_changes
    """)
    assert done.returncode == 0, done.stderr
    for leak in ("iptables -t filter: > -N KUBE-FIREWALL",
                 'iptables -t filter: > -A INPUT -m comment --comment "kubernetes firewall" -j KUBE-FIREWALL',
                 "> net.ipv4.ip_forward 1", "link docker0 was not there before"):
        assert leak in done.stdout, done.stdout


def test_an_earlier_engines_chains_are_kept(tmp_path):
    """Docker ran here before (its chains are there, its daemon is not): the engine started and
    stopped again changes nothing, and nothing that was there is removed."""
    env = _fake_host(tmp_path, DOCKER, links="lo eth0 docker0", forwarding="1")
    done = _run(env, """
        start_own_dockerd
        stop_own_dockerd
        echo "changes: [$(host_changes)]"
    """)
    assert done.returncode == 0, done.stderr
    assert "changes: []" in done.stdout, done.stdout
    host = Path(env["FAKE_HOST"])
    assert (host / "iptables.filter").read_text().splitlines() == DOCKER["filter"]
    assert "docker0" in (host / "links").read_text().split()


@pytest.mark.parametrize("rule", ["-A INPUT -s 10.0.0.0/8 -j ACCEPT", "-A FORWARD -j DOCKER-USER"])
def test_rules_that_were_there_before_are_never_taken_back(tmp_path, rule):
    before = {**CLEAN, "filter": [*CLEAN["filter"], "-N DOCKER-USER", rule]}
    env = _fake_host(tmp_path, before)
    done = _run(env, """
        start_own_dockerd
        stop_own_dockerd
        iptables -t filter -S
    """)
    assert done.returncode == 0, done.stderr
    assert rule in done.stdout.splitlines() and "-N DOCKER-USER" in done.stdout.splitlines()
    assert "-N DOCKER-ISOLATION-STAGE-1" not in done.stdout


def test_an_engine_still_running_when_the_build_fails_is_stopped_by_down(tmp_path):
    """The image build failed with the engine up: `down` stops it and takes back what it changed,
    before the rest of the teardown, and the host compares equal."""
    env = _fake_host(tmp_path, CLEAN)
    done = _run(env, """
        start_own_dockerd
        down
    """)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "host is not as it was" not in done.stderr
    host = Path(env["FAKE_HOST"])
    assert not (host / "dockerd.running").exists()
    assert (host / "iptables.nat").read_text().splitlines() == CLEAN["nat"]
    assert not (tmp_path / "e2e").exists()

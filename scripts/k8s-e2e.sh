#!/usr/bin/env bash
# `rbl run --backend kubernetes` end to end on a real single-node Kubernetes cluster on loopback,
# from parts a bare Debian machine can get (no container registry, no release binaries):
#   - kube-apiserver, kube-controller-manager, kube-scheduler and kubelet built from the Go module
#     proxy by scripts/k8s-build.sh (cached by version under ~/.cache/rbl-kube/);
#   - etcd, containerd, runc and the CNI plugins from Debian packages (installed when missing);
#   - the rbl runner image (rbl, JDK, Node.js and every client service, the clients built on this
#     machine) built by the local Docker engine from `rbl compile --target kubernetes`'s build
#     context, on scripts/make-base-image.sh's bases, and imported into the cluster's containerd.
# Then runs the tests marked `kubernetes` (tests/test_kubernetes_e2e.py) against it, and tears
# everything down: every process it started, mounts, the CNI bridge, the kubelet's iptables chains,
# the sysctls the kubelet and the CNI changed (restored to the values found), the directories it
# created. A Docker engine the script had to start for the image build is stopped once the image
# is saved, and what it leaves behind when it stops (its iptables chains and rules, the docker0
# bridge, IP forwarding) is taken back then, so the host compares equal to its state before at
# the end; whatever could not be taken back still shows in that comparison.
#
# usage (root): scripts/k8s-e2e.sh [pytest arguments]
#   RBL_K8S_KEEP=1 keeps the cluster up after the tests (then: scripts/k8s-e2e.sh down)
#   scripts/k8s-e2e.sh up|down   only start (prints the kubeconfig) or only tear down
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
VERSION=${RBL_KUBE_VERSION:-v1.31.4}
B=${RBL_K8S_DIR:-/tmp/rbl-k8s-e2e}
BASE_IMAGE=${RBL_DOCKER_BASE:-rbl-local/debian-python-java:bookworm}
RUNNER_BASE=${RBL_DOCKER_POLYGLOT_BASE:-rbl-local/debian-python-java-node-go:bookworm}   # + Node.js, Go
NODE=$(hostname)
PAUSE_IMAGE=registry.k8s.io/pause:3.10
SOCK=$B/containerd/containerd.sock
IPT_TABLES="filter nat mangle raw"
# what the kubelet (overcommit, panic) and the CNI bridge (forwarding) set, restored at the end
SYSCTLS="vm.overcommit_memory kernel.panic kernel.panic_on_oops net.ipv4.ip_forward"
POD_FORWARD="-i rblk8s0 -o rblk8s0 -m comment --comment rbl-k8s-e2e -j ACCEPT"
K() { kubectl --kubeconfig "$B/admin.kubeconfig" "$@"; }
log() { printf '[k8s-e2e %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ---------------------------------------------------------------------------------------------
down() {
    [ -d "$B" ] || return 0
    log "tearing down $B"
    # still running only when the image build failed: nothing of the cluster has started yet, so
    # everything that changed since docker.before is the engine's
    [ -f "$B/dockerd.pid" ] && stop_own_dockerd
    stop kubelet
    if [ -S "$SOCK" ]; then                           # the pods' containers, while containerd still runs
        for id in $(ctr --address "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
            ctr --address "$SOCK" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
        done
        sleep 1
        for id in $(ctr --address "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
            ctr --address "$SOCK" -n k8s.io tasks rm -f "$id" >/dev/null 2>&1 || true; done
        for id in $(ctr --address "$SOCK" -n k8s.io containers ls -q 2>/dev/null); do
            ctr --address "$SOCK" -n k8s.io containers rm "$id" >/dev/null 2>&1 || true; done
    fi
    stop containerd
    # containerd-shim processes of this containerd outlive it: stop those started for our state dir
    for pid in $(pgrep -f "containerd-shim.*-address $SOCK" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    stop kube-scheduler; stop kube-controller-manager; stop kube-apiserver; stop etcd
    # (no mount left is no failure: a teardown after a failed start has none, and grep's status would end it)
    findmnt -rn -o TARGET | { grep -E "^$B/" || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
    if [ -f "$B/netns.before" ]; then                 # network namespaces the CNI created
        for n in /var/run/netns/cni-*; do
            [ -e "$n" ] || continue
            grep -qx "$n" "$B/netns.before" || { umount "$n" 2>/dev/null || true; rm -f "$n"; }
        done
    fi
    ip link del rblk8s0 2>/dev/null || true
    # the pod-to-pod forwarding rule up() added (as a cluster's CNI adds its own)
    while iptables -C FORWARD $POD_FORWARD 2>/dev/null; do iptables -D FORWARD $POD_FORWARD || break; done
    if [ -f "$B/iptables.before" ]; then
        for ipt in iptables ip6tables; do
            for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT KUBE-NODEPORTS KUBE-PROXY-CANARY; do
                for t in filter nat mangle; do
                    grep -qx -- "-N $chain" "$B/$ipt.$t.before" 2>/dev/null && continue     # there before us
                    while $ipt -t "$t" -S 2>/dev/null | grep -q -- "-j $chain\$"; do
                        rule=$($ipt -t "$t" -S | grep -- "-j $chain\$" | head -1 | sed 's/^-A /-D /')
                        eval "$ipt -t $t $rule" 2>/dev/null || break
                    done
                    $ipt -t "$t" -F "$chain" 2>/dev/null || true; $ipt -t "$t" -X "$chain" 2>/dev/null || true
                done
            done
        done
    fi
    if [ -f "$B/sysctl.before" ]; then
        while read -r key value; do sysctl -qw "$key=$value" || true; done < "$B/sysctl.before"
    fi
    if [ -f "$B/paths.created" ]; then
        while read -r p; do rm -rf "$p"; done < "$B/paths.created"
    fi
    local changed
    changed=$(host_changes)
    rm -rf "$B"
    if [ -n "$changed" ]; then log "the host is not as it was:"; echo "$changed" >&2; return 1; fi
    log "torn down; processes, mounts, network, iptables, sysctls and paths are as they were"
}

host_changes() {   # what differs from the state recorded before the cluster started
    local p t ipt link
    pgrep -af "$B" | grep -v -e "k8s-e2e.sh" -e pgrep || true
    findmnt -rn -o TARGET | grep -E "^$B/" || true
    ip link show rblk8s0 >/dev/null 2>&1 && echo "link rblk8s0 still exists"
    if [ -f "$B/links.before" ]; then            # the Docker engine's bridges
        for link in $(link_names); do
            case $link in docker0|br-*) grep -qxF -- "$link" "$B/links.before" || echo "link $link was not there before" ;; esac
        done
    fi
    if [ -f "$B/docker-containerd.before" ] && [ ! -s "$B/docker-containerd.before" ]; then
        pgrep -af "$DOCKER_CONTAINERD" | grep -v pgrep | sed 's/^/the engine'"'"'s containerd still runs: /' || true
    fi
    if [ -f "$B/sysctl.before" ]; then
        read_sysctls | diff "$B/sysctl.before" - || true
    fi
    for ipt in iptables ip6tables; do
        for t in $IPT_TABLES; do
            [ -f "$B/$ipt.$t.before" ] || continue
            $ipt -t "$t" -S 2>/dev/null | diff "$B/$ipt.$t.before" - | sed "s/^/$ipt -t $t: /" || true
        done
    done
    if [ -f "$B/paths.created" ]; then
        while read -r p; do [ -e "$p" ] && echo "$p still exists"; done < "$B/paths.created"
    fi
    return 0
}

stop() {   # name [seconds to wait before SIGKILL, 10]
    local f=$B/$1.pid
    [ -f "$f" ] || return 0
    local pid; pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq $((${2:-10} * 5))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
}

# shellcheck disable=SC2086  # SYSCTLS is a list of names
read_sysctls() { sysctl $SYSCTLS 2>/dev/null | sed 's/ = / /' || true; }

link_names() { ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' || true; }

# ---------------------------------------------------------------------------------------------
# A Docker engine of the script's own. dockerd creates its iptables chains (DOCKER, DOCKER-USER,
# DOCKER-ISOLATION-STAGE-*, ... in filter, nat and raw), adds rules to the built-in chains, sets
# FORWARD's policy to DROP, creates docker0 and turns IP forwarding on, and leaves all of it when
# it stops (it reuses them when it starts again). On a machine where Docker never ran that is all
# new, and it is taken back as soon as the engine has stopped, from a snapshot taken just before
# it started: only what changed in between is touched (chains and rules that were there before
# stay), and before any part of the cluster exists, so nothing the kubelet or the CNI leave can
# be mistaken for the engine's and hidden from the final comparison.
DOCKER_CONTAINERD="containerd --config /var/run/docker/containerd/containerd.toml"

start_own_dockerd() {
    local d=$B/docker.before ipt t
    mkdir -p "$d"
    for ipt in iptables ip6tables; do
        for t in $IPT_TABLES; do $ipt -t "$t" -S > "$d/$ipt.$t" 2>/dev/null || true; done
    done
    link_names > "$d/links"
    sysctl net.ipv4.ip_forward net.ipv6.conf.all.forwarding 2>/dev/null | sed 's/ = / /' > "$d/sysctl" || true
    pgrep -f "$DOCKER_CONTAINERD" > "$B/docker-containerd.before" || true
    # its pid file under $B: the engine's command line names $B, so the final check sees it if it outlives us
    bg dockerd dockerd --pidfile "$B/dockerd.pidfile"
    wait_for 60 dockerd docker info
}

stop_own_dockerd() {
    stop dockerd 60                                  # it stops its containerd on the way out
    if [ ! -s "$B/docker-containerd.before" ]; then  # ... unless it was killed first
        pkill -f "$DOCKER_CONTAINERD" 2>/dev/null || true
    fi
    undo_dockerd
}

undo_dockerd() {   # take back what changed on the host since docker.before, then forget it
    local d=$B/docker.before ipt t now chain policy line link key value old new
    [ -d "$d" ] || return 0
    for ipt in iptables ip6tables; do
        for t in $IPT_TABLES; do
            [ -s "$d/$ipt.$t" ] || continue              # a table that could not be read before: left alone
            now=$($ipt -t "$t" -S 2>/dev/null) || continue
            old=$(awk '$1 == "-N" || $1 == "-P" {print $2}' "$d/$ipt.$t")    # chains there before
            # its rules in chains that were there before, last first; its own chains are emptied below
            printf '%s\n' "$now" | grep -e '^-A ' | grep -vxF -f "$d/$ipt.$t" | tac |
                while IFS= read -r line; do
                    chain=$(awk '{print $2}' <<< "$line")
                    grep -qxF -- "$chain" <<< "$old" || continue
                    eval "$ipt -t $t ${line/#-A /-D }" 2>/dev/null || true
                done || true
            awk '$1 == "-P" {print $2, $3}' "$d/$ipt.$t" | while read -r chain policy; do
                $ipt -t "$t" -P "$chain" "$policy" 2>/dev/null || true
            done || true
            new=$(printf '%s\n' "$now" | awk '$1 == "-N" {print $2}' | grep -vxF -f <(printf '%s\n' "$old") || true)
            for chain in $new; do $ipt -t "$t" -F "$chain" 2>/dev/null || true; done
            for chain in $new; do $ipt -t "$t" -X "$chain" 2>/dev/null || true; done
        done
    done
    for link in $(link_names); do
        case $link in docker0|br-*) grep -qxF -- "$link" "$d/links" || ip link del "$link" 2>/dev/null || true ;; esac
    done
    while read -r key value; do sysctl -qw "$key=$value" 2>/dev/null || true; done < "$d/sysctl"
    rm -rf "$d"                # once: what changes after this is the cluster's, not the engine's
    log "the Docker engine started for the image build is stopped; its iptables chains, bridge and forwarding taken back"
}

bg() { local name=$1; shift; "$@" > "$B/logs/$name.log" 2>&1 & echo $! > "$B/$name.pid"; }

wait_for() {   # seconds, what, command...
    local seconds=$1 what=$2; shift 2
    for _ in $(seq $((seconds * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
    log "timed out waiting for $what"; tail -n 30 "$B"/logs/*.log >&2 || true; return 1
}

# ---------------------------------------------------------------------------------------------
packages() {
    local need=()
    command -v etcd >/dev/null || need+=(etcd-server)
    command -v containerd >/dev/null || need+=(containerd)
    command -v runc >/dev/null || need+=(runc)
    [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
    command -v kubectl >/dev/null || need+=(kubernetes-client)
    command -v dockerd >/dev/null || need+=(docker.io)
    command -v debootstrap >/dev/null || need+=(debootstrap)
    if [ ${#need[@]} -gt 0 ]; then
        log "installing ${need[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi
}

certificates() {
    local P=$B/pki
    mkdir -p "$P"
    cat > "$P/ext.cnf" <<X
[server]
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
[client]
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth
[kubelet]
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:$NODE
X
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$P/ca.key" -out "$P/ca.crt" -subj /CN=rbl-e2e-ca -days 2 2>/dev/null
    cert() {
        openssl req -newkey rsa:2048 -nodes -keyout "$P/$1.key" -out "$P/$1.csr" -subj "$2" 2>/dev/null
        openssl x509 -req -in "$P/$1.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 2 \
            -extfile "$P/ext.cnf" -extensions "$3" -out "$P/$1.crt" 2>/dev/null
    }
    cert apiserver /CN=kube-apiserver server
    cert admin "/O=system:masters/CN=rbl-e2e-admin" client
    cert kubelet "/O=system:nodes/CN=system:node:$NODE" kubelet
    openssl genrsa -out "$P/sa.key" 2048 2>/dev/null
    openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null
    for user in admin kubelet; do
        local kc="kubectl config --kubeconfig=$B/$user.kubeconfig"
        $kc set-cluster e2e --server=https://127.0.0.1:6443 --certificate-authority="$P/ca.crt" --embed-certs >/dev/null
        $kc set-credentials "$user" --client-certificate="$P/$user.crt" --client-key="$P/$user.key" --embed-certs >/dev/null
        $kc set-context e2e --cluster=e2e --user="$user" >/dev/null
        $kc use-context e2e >/dev/null
    done
}

images() {
    # the runner image, as `rbl compile --target kubernetes` describes it, built by the local engine
    docker info >/dev/null 2>&1 || start_own_dockerd
    docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 || scripts/make-base-image.sh --java "$BASE_IMAGE" >/dev/null
    docker image inspect "$RUNNER_BASE" >/dev/null 2>&1 ||
        scripts/make-base-image.sh --node --go --from "$BASE_IMAGE" "$RUNNER_BASE" >/dev/null
    local start=$SECONDS
    # the compile builds the clients here when ~/.cache/rbl/clients lacks them (Maven, npm, go)
    python3 -m rbl compile examples/quickstart.rbl --target kubernetes -o "$B/compiled" > "$B/logs/compile.log" 2>&1 ||
        { cat "$B/logs/compile.log" >&2; return 1; }
    log "runner image context written in $((SECONDS - start)) s ($(du -sh "$B/compiled/kubernetes/image" | cut -f1))"
    start=$SECONDS
    docker build -q -t "rbl/runner:e2e" --build-arg "BASE_IMAGE=$RUNNER_BASE" "$B/compiled/kubernetes/image" >/dev/null
    log "runner image built in $((SECONDS - start)) s: $(docker image inspect -f '{{.Size}}' rbl/runner:e2e |
        awk '{printf "%.0f MB", $1 / 1e6}'), $(docker image inspect -f '{{index .Config.Labels "dev.rbl.runner.clients"}}' rbl/runner:e2e)"
    # the pods' sandbox: the runner's base, so that the two share their layers in the import
    printf 'FROM %s\nENTRYPOINT ["sleep", "infinity"]\n' "$RUNNER_BASE" | docker build -q -t "$PAUSE_IMAGE" - >/dev/null
    docker save -o "$B/images.tar" rbl/runner:e2e "$PAUSE_IMAGE"
    if [ -f "$B/dockerd.pid" ]; then stop_own_dockerd; fi
}

snapshot_host() {   # what the kubelet, the CNI and a Docker engine started here change on the host, to put back afterwards
    local ipt t p
    read_sysctls > "$B/sysctl.before"
    for ipt in iptables ip6tables; do
        for t in $IPT_TABLES; do $ipt -t "$t" -S > "$B/$ipt.$t.before" 2>/dev/null || true; done
    done
    touch "$B/iptables.before"
    link_names > "$B/links.before"
    ls -d /var/run/netns/cni-* > "$B/netns.before" 2>/dev/null || true
    for p in /var/lib/kubelet /var/log/pods /var/log/containers /var/lib/cni /var/run/netns /run/containerd/runc \
             /run/containerd/fifo /run/containerd; do
        [ -e "$p" ] || echo "$p" >> "$B/paths.created"
    done
}

up() {
    [ "$(id -u)" = 0 ] || { echo "k8s-e2e: needs root (containerd, kubelet, iptables)" >&2; exit 4; }
    [ ! -e "$B" ] || { echo "k8s-e2e: $B exists: a cluster is up or was not torn down; run: $0 down" >&2; exit 4; }
    packages
    BIN=$(scripts/k8s-build.sh "$VERSION" | tail -1)
    mkdir -p "$B"/{logs,etcd,containerd/root,containerd/state,cni/net.d,cni/ipam,kubelet/root}
    snapshot_host
    images
    log "starting etcd, the API server and containerd"
    certificates
    bg etcd etcd --name e2e --data-dir "$B/etcd" --listen-client-urls http://127.0.0.1:2379 \
        --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
        --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster e2e=http://127.0.0.1:2380 \
        --listen-metrics-urls http://127.0.0.1:2381
    wait_for 30 etcd curl -sf http://127.0.0.1:2379/health
    local P=$B/pki
    bg kube-apiserver "$BIN/kube-apiserver" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=6443 \
        --etcd-servers=http://127.0.0.1:2379 --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
        --client-ca-file="$P/ca.crt" --kubelet-client-certificate="$P/admin.crt" --kubelet-client-key="$P/admin.key" \
        --kubelet-certificate-authority="$P/ca.crt" --kubelet-preferred-address-types=Hostname \
        --endpoint-reconciler-type=none --service-account-key-file="$P/sa.pub" \
        --service-account-signing-key-file="$P/sa.key" --service-account-issuer=https://kubernetes.default.svc \
        --service-cluster-ip-range=10.96.0.0/16 --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction
    # containerd of our own (its own socket and state: the Docker engine's is left alone).
    # restrict_oom_score_adj: runc may not lower oom_score_adj on VMs without CAP_SYS_RESOURCE.
    cat > "$B/containerd/config.toml" <<X
version = 2
root = "$B/containerd/root"
state = "$B/containerd/state"
[grpc]
  address = "$SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$B/cni/net.d"
X
    cat > "$B/cni/net.d/10-rbl-e2e.conflist" <<X
{"cniVersion": "1.0.0", "name": "rbl-e2e", "plugins": [
  {"type": "bridge", "bridge": "rblk8s0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "dataDir": "$B/cni/ipam"}},
  {"type": "loopback"}]}
X
    # pods talk to each other across the CNI bridge (a topology's replicas, the load from a shard's pod);
    # with bridge netfilter on and a FORWARD policy of DROP (a Docker engine sets it), that traffic is
    # dropped unless accepted, as a cluster's CNI (flannel, calico) accepts its pod network's
    iptables -I FORWARD 1 $POD_FORWARD
    bg containerd containerd --config "$B/containerd/config.toml"
    wait_for 30 containerd ctr --address "$SOCK" version
    local start=$SECONDS
    ctr --address "$SOCK" -n k8s.io images import "$B/images.tar" >/dev/null
    log "images imported into the cluster's containerd in $((SECONDS - start)) s"
    rm -f "$B/images.tar"
    wait_for 90 "the API server" K get --raw /readyz
    log "starting the controller manager, the scheduler and the kubelet"
    bg kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$B/admin.kubeconfig" \
        --authentication-kubeconfig="$B/admin.kubeconfig" --authorization-kubeconfig="$B/admin.kubeconfig" \
        --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials \
        --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt"
    bg kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$B/admin.kubeconfig" \
        --authentication-kubeconfig="$B/admin.kubeconfig" --authorization-kubeconfig="$B/admin.kubeconfig" \
        --bind-address=127.0.0.1 --leader-elect=false
    cat > "$B/kubelet/config.yaml" <<X
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
tlsCertFile: $P/kubelet.crt
tlsPrivateKeyFile: $P/kubelet.key
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $P/ca.crt}}
authorization: {mode: Webhook}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
X
    bg kubelet "$BIN/kubelet" --config="$B/kubelet/config.yaml" --kubeconfig="$B/kubelet.kubeconfig" \
        --hostname-override="$NODE" --root-dir="$B/kubelet/root"
    node_ready() { [ "$(K get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
    wait_for 120 "a Ready node" node_ready
    log "cluster up: node $NODE Ready; kubeconfig $B/admin.kubeconfig"
}

# sourced (tests/test_hostile_compile_e2e_teardown.py runs the functions above on a fake host): no more
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0
case "${1:-}" in
    up) up; echo "$B/admin.kubeconfig"; exit 0 ;;
    down) down; exit 0 ;;
esac
trap 'code=$?; [ -n "${RBL_K8S_KEEP:-}" ] || down; exit $code' EXIT
trap 'exit 130' INT TERM
up
RBL_KUBECONFIG="$B/admin.kubeconfig" RBL_RUNNER_IMAGE=rbl/runner:e2e \
    python3 -m pytest -q -m kubernetes tests/test_kubernetes_e2e.py "$@"

#!/usr/bin/env bash
# Two test hosts on this machine: network namespaces joined by a veth pair, each with an
# address, a host name and a hosts file of its own, so that Open MPI started in one
# reaches the other over a real TCP/IP stack. Nothing leaves the machine: the addresses
# exist only inside the namespaces made here, and netns_down removes all of it.
#
# Sourced:  source netns_hosts.sh; netns_up WORK_DIR || exit 77; trap netns_down EXIT
# Then:     on_host node-a COMMAND...       runs COMMAND on host node-a
#           netns_agent                     the path of Open MPI's remote agent (what ssh
#                                           is between real hosts): --mca plm_rsh_agent=...
#           netns_link down|up              drops or restores the link between the hosts
#           netns_pids                      the processes still running on either host
# netns_up prints why and returns 1 where namespaces cannot be made (not root, no `ip`).

netns_hosts=(node-a node-b)
netns_address=(10.213.0.1 10.213.0.2)
netns_names=()
netns_work=""
netns_tag=$$

netns_up() {
  netns_work=$1
  if [ "$(id -u)" != 0 ]; then echo "netns_hosts: needs root to make network namespaces"; return 1; fi
  for tool in ip unshare; do
    command -v "$tool" >/dev/null || { echo "netns_hosts: '$tool' is missing (apt-get install iproute2 util-linux)"; return 1; }
  done
  local tag=$netns_tag i
  netns_names=("shardlm-a-$tag" "shardlm-b-$tag")
  for i in 0 1; do
    if ! ip netns add "${netns_names[$i]}" 2>"$netns_work/netns.err"; then
      echo "netns_hosts: cannot make a network namespace: $(cat "$netns_work/netns.err")"
      netns_names=("${netns_names[@]:0:$i}")
      netns_down
      return 1
    fi
    # `ip netns exec` binds /etc/netns/NAME/hosts over /etc/hosts inside the namespace.
    mkdir -p "/etc/netns/${netns_names[$i]}"
    printf '127.0.0.1 localhost\n%s %s\n%s %s\n' "${netns_address[0]}" "${netns_hosts[0]}" \
      "${netns_address[1]}" "${netns_hosts[1]}" >"/etc/netns/${netns_names[$i]}/hosts"
  done
  ip link add "shl-a-$tag" type veth peer name "shl-b-$tag" || { netns_down; return 1; }
  for i in 0 1; do
    local ns=${netns_names[$i]} device=shl-${netns_hosts[$i]#node-}-$tag
    ip link set "$device" netns "$ns" &&
      ip -n "$ns" addr add "${netns_address[$i]}/24" dev "$device" &&
      ip -n "$ns" link set "$device" up &&
      ip -n "$ns" link set lo up || { netns_down; return 1; }
    # As docs/TENSOR_PARALLEL.md advises for hosts of a job: TCP gives up on a peer that
    # stopped acknowledging after about 13 s instead of 15 minutes, so a daemon with data in
    # flight when the link drops (its keepalive probes wait for that data) notices too.
    ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2=5 || { netns_down; return 1; }
  done
  netns_write_agent
}

# Open MPI starts its daemon on another host as `AGENT HOST COMMAND...`; this agent enters
# that host's namespace (with its host name) instead of logging in over ssh.
netns_write_agent() {
  cat >"$netns_work/agent.sh" <<AGENT
#!/bin/sh
host=\$1; shift
case "\$host" in
  ${netns_hosts[0]}|${netns_address[0]}) ns=${netns_names[0]}; name=${netns_hosts[0]};;
  ${netns_hosts[1]}|${netns_address[1]}) ns=${netns_names[1]}; name=${netns_hosts[1]};;
  *) echo "netns agent: no test host '\$host'" >&2; exit 255;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$1" && shift && exec sh -c "\$*"' sh "\$name" "\$@"
AGENT
  chmod +x "$netns_work/agent.sh"
}

netns_agent() { echo "$netns_work/agent.sh"; }

on_host() {
  local host=$1
  shift
  "$netns_work/agent.sh" "$host" "$(printf '%q ' "$@")"
}

# `up` returns once both ends report the link up (at most 10 s), so that a job started
# next does not meet a link still coming up.
netns_link() {
  ip -n "${netns_names[0]}" link set "shl-a-$netns_tag" "$1" || return 1
  [ "$1" = up ] || return 0
  local _
  for _ in $(seq 1 100); do
    ip -n "${netns_names[0]}" -o link show "shl-a-$netns_tag" | grep -q "state UP" &&
      ip -n "${netns_names[1]}" -o link show "shl-b-$netns_tag" | grep -q "state UP" && return 0
    sleep 0.1
  done
  echo "netns_hosts: the link between the hosts is not up 10 s after 'link up'"
  return 1
}

netns_pids() {
  local ns
  for ns in "${netns_names[@]}"; do ip netns pids "$ns" 2>/dev/null; done
}

netns_down() {
  local ns pid
  for ns in "${netns_names[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  netns_names=()
}

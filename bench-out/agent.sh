#!/bin/sh
# rsh agent of qcg-bench coll --lab: ADDRESS CMD... runs CMD in the lab host with that address
host="$1"; shift
case "$host" in
  10.1.0.2) name=alpha-1 ;;
  10.1.0.3) name=alpha-2 ;;
  10.1.0.4) name=alpha-3 ;;
  10.1.0.5) name=alpha-4 ;;
  10.2.0.2) name=beta-1 ;;
  10.2.0.3) name=beta-2 ;;
  10.2.0.4) name=beta-3 ;;
  10.2.0.5) name=beta-4 ;;
  10.3.0.2) name=gamma-1 ;;
  10.3.0.3) name=gamma-2 ;;
  10.3.0.4) name=gamma-3 ;;
  10.3.0.5) name=gamma-4 ;;
  10.4.0.2) name=delta-1 ;;
  10.4.0.3) name=delta-2 ;;
  10.4.0.4) name=delta-3 ;;
  10.4.0.5) name=delta-4 ;;
  *) echo "coll_osu agent: no lab host has address $host" >&2; exit 1 ;;
esac
exec '/work/main/target/release/qcg-lab' exec --prefix mp7559 "$name" -- sh -c "$*"

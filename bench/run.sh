#!/usr/bin/env bash
# make bench: Labstream against curl on the same nginx-served file, same run, same machine.
# First figure (issue 3): pinned download of a 1 GiB file vs `curl -o /dev/null`, medians of
# RUNS runs after a warm-up, alternating contenders. Writes bench/results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
SIZE_MB=${SIZE_MB:-1024}
BIN=.build/release/labstream
command -v nginx >/dev/null || { echo "installing nginx-light"; apt-get install -y -qq nginx-light >/dev/null; }
W=$(mktemp -d /tmp/labstream-bench.XXXXXX)
cleanup() {
    [ -f "$W/mnt.pid" ] && $BIN unmount "$W/mnt" >/dev/null 2>&1 || true
    [ -f "$W/nginx.pid" ] && kill "$(cat "$W/nginx.pid")" 2>/dev/null || true
    [ -n "${FIXTURE_PID:-}" ] && kill "$FIXTURE_PID" 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/media" "$W/mnt"
chmod 755 "$W" "$W/media"   # nginx workers run as www-data
dd if=/dev/urandom of="$W/media/bench.mkv" bs=1M count="$SIZE_MB" status=none
chmod 644 "$W/media/bench.mkv"

$BIN fixture "$W/media" > "$W/fixture.url" &
FIXTURE_PID=$!
for _ in $(seq 1 100); do [ -s "$W/fixture.url" ] && break; sleep 0.1; done
FIXTURE=$(head -n1 "$W/fixture.url")
ID=$(ls "$W/media/.by-id" | head -n1)
PORT=$(( 20000 + RANDOM % 20000 ))
cat > "$W/nginx.conf" <<CONF
worker_processes 2;
daemon on;
pid $W/nginx.pid;
error_log $W/nginx-error.log;
events { worker_connections 256; }
http {
    access_log $W/access.log;
    sendfile on;
    server {
        listen 127.0.0.1:$PORT;
        location ~ ^/Items/(?<id>[0-9a-f]+)/Download\$ { alias $W/media/.by-id/\$id; }
        location / { proxy_pass $FIXTURE; }
    }
}
CONF
nginx -c "$W/nginx.conf" -p "$W"
URL="http://127.0.0.1:$PORT"

export LABSTREAM_CONFIG_DIR="$W/config" LABSTREAM_DATA_DIR="$W/data"
echo demo | $BIN server add jellyfin bench --url "$URL" --user demo --password-stdin >/dev/null
# The bench file is random bytes, which the playback probe would rightly reject.
printf '\n[cache]\nplayback_probe = no\n' >> "$W/config/labstream.conf"
BYTES=$(stat -c %s "$W/media/bench.mkv")

curl_once() { curl -s -o /dev/null -w '%{time_total}' "$URL/Items/$ID/Download"; }
labstream_once() {
    rm -rf "$W/data/partials" "$W/data/index.sqlite"*
    $BIN mount "$W/mnt" >/dev/null
    touch "$W/mnt.pid"
    local file
    file=$(find "$W/mnt" -type f | head -n1)
    local start end
    start=$(date +%s.%N)
    $BIN pin --wait "$file" >/dev/null
    end=$(date +%s.%N)
    $BIN unmount "$W/mnt" >/dev/null
    rm -f "$W/mnt.pid"
    echo "$end - $start" | bc -l
}

# The ceiling for any durable download on this disk: write and fdatasync the same bytes.
disk_once() { local s e; s=$(date +%s.%N); dd if=/dev/zero of="$W/ddtest" bs=1M count="$SIZE_MB" conv=fdatasync status=none; e=$(date +%s.%N); rm -f "$W/ddtest"; echo "$e - $s" | bc -l; }

curl_once >/dev/null; labstream_once >/dev/null   # warm-up
declare -a C L D
for i in $(seq 1 "$RUNS"); do
    C+=("$(curl_once)")
    L+=("$(labstream_once)")
    D+=("$(disk_once)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mbps() { echo "$BYTES / $1 / 1000000" | bc -l; }
CM=$(median "${C[@]}"); LM=$(median "${L[@]}"); DM=$(median "${D[@]}")
CMB=$(mbps "$CM"); LMB=$(mbps "$LM"); DMB=$(mbps "$DM")
RATIO=$(echo "$LMB / $CMB" | bc -l)
DRATIO=$(echo "$LMB / $DMB" | bc -l)
printf '\n%-44s %10s %10s %10s\n' "case (${SIZE_MB} MiB, $RUNS runs, median)" "seconds" "MB/s" "ratio"
printf '%-44s %10.3f %10.0f %10s\n' "curl -o /dev/null (reference)" "$CM" "$CMB" "1.00"
printf '%-44s %10.3f %10.0f %10.2f\n' "B8 labstream pin --wait (target >= 0.9x)" "$LM" "$LMB" "$RATIO"
printf '%-44s %10.3f %10.0f %10s\n' "disk ceiling: dd conv=fdatasync" "$DM" "$DMB" "-"
printf '%-44s %10s %10s %10.2f\n' "labstream / disk ceiling" "" "" "$DRATIO"
cat > bench/results.json <<JSON
{"B8_pinned_download": {"bytes": $BYTES, "runs": $RUNS, "curl_seconds": [$(IFS=,; echo "${C[*]}")], "labstream_seconds": [$(IFS=,; echo "${L[*]}")],
  "curl_median_mbps": $(printf '%.1f' "$CMB"), "labstream_median_mbps": $(printf '%.1f' "$LMB"), "ratio": $(printf '%.3f' "$RATIO"), "target": 0.9,
  "disk_fdatasync_mbps": $(printf '%.1f' "$DMB"), "ratio_to_disk": $(printf '%.3f' "$DRATIO")}}
JSON
echo "wrote bench/results.json"

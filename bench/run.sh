#!/usr/bin/env bash
# make bench: Labstream side by side with curl, the raw disk and `rclone mount --vfs-cache-mode
# full`, all reading identical bytes from one nginx on loopback (the Jellyfin fixture's API sits
# behind nginx; /Items/{id}/Download and rclone's /media/ are answered by nginx itself).
# Cases B1–B9 of issue 7, B10 (a household's library), B11 (the same on Silo), B12 (play start, issue 42) and B13 (the next episode's start); each timed case runs RUNS times after a warm-up, contenders
# alternating, caches dropped between cold runs. Prints a table and writes bench/results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
SIZE_MB=${SIZE_MB:-1024}     # B1–B3, B6, B8
SMALL_MB=${SMALL_MB:-256}    # each of the 8 files of B9
MANY=${MANY:-10000}          # items in the B5 library
BIG_FILMS=${BIG_FILMS:-90000}   # B10: films, beside BIG_SERIES series of 5 seasons × 10 episodes
BIG_SERIES=${BIG_SERIES:-200}
SILO_SIZES=${SILO_SIZES:-5000 100000}   # B11: items of the Silo library (nine in ten films, the rest episodes)
CASES=${CASES:-B1 B2 B3 B4 B5 B6 B7 B8 B9 B10 B11 B12 B13}   # e.g. CASES=B8 make bench
want() { [[ " $CASES " == *" $1 "* ]]; }
BIN=$PWD/.build/release/labstream
FIXTURE_BIN=$PWD/.build/release/labstream-fixture   # the bench library server (never installed)
need() { command -v "$1" >/dev/null || { echo "installing $2"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; }
need nginx nginx-light; need rclone rclone; need curl curl; need bc bc; need mpv mpv; need ffprobe ffmpeg; need fusermount3 fuse3; need ss iproute2
CC=${CC:-$(command -v cc || echo "$(dirname "$(command -v swift || echo /opt/swift/usr/bin/swift)")/clang")}

W=$(mktemp -d /tmp/labstream-bench.XXXXXX)
LS_MNT=$W/mnt RC_MNT=$W/rc FL_MNT=$W/floor-mnt
cleanup() {
    fusermount3 -uz "$FL_MNT" 2>/dev/null || true
    $BIN unmount "$LS_MNT" >/dev/null 2>&1 || true
    LABSTREAM_CONFIG_DIR=$W/many-config LABSTREAM_DATA_DIR=$W/many-data $BIN unmount "$W/many-mnt" >/dev/null 2>&1 || true
    LABSTREAM_CONFIG_DIR=$W/big-config LABSTREAM_DATA_DIR=$W/big-data $BIN unmount "$W/big-mnt" >/dev/null 2>&1 || true
    fusermount3 -uz "$RC_MNT" 2>/dev/null || fusermount -uz "$RC_MNT" 2>/dev/null || true
    pkill -f "rclone mount :http: $RC_MNT" 2>/dev/null || true
    [ -f "$W/nginx.pid" ] && kill "$(cat "$W/nginx.pid")" 2>/dev/null || true
    for n in $SILO_SIZES; do LABSTREAM_CONFIG_DIR=$W/silo$n-config LABSTREAM_DATA_DIR=$W/silo$n-data $BIN unmount "$W/silo$n-mnt" >/dev/null 2>&1 || true; done
    for p in ${FIXTURE_PID:-} ${MANY_PID:-} ${BIG_PID:-} ${SILO_PID:-}; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
    [ -n "${BENCH_KEEP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/media" "$LS_MNT" "$RC_MNT" "$FL_MNT" "$W/many" "$W/many-mnt" "$W/floor-big" "$W/floor-small"
# The FUSE floor (bench/floor.c): the least any FUSE daemon does for the same requests.
"$CC" -O2 -o "$W/floor" bench/floor.c $(pkg-config --cflags --libs fuse3)
"$CC" -O2 -o "$W/pinfloor" bench/pinfloor.c $(pkg-config --cflags --libs libcurl) -lpthread
chmod 755 "$W" "$W/media"   # nginx workers run as www-data

echo "generating media in $W"
dd if=/dev/urandom of="$W/media/bench.mkv" bs=1M count="$SIZE_MB" status=none
for i in 1 2 3 4 5 6 7 8; do dd if=/dev/urandom of="$W/media/s$i.mkv" bs=1M count="$SMALL_MB" status=none; done
ffmpeg -v error -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 60 -c:v libx264 -preset ultrafast -pix_fmt yuv420p "$W/media/clip.mkv"
if want B12 || want B13; then
    # A 77 MB film (60 s of 1080p at 10 Mbit/s), as Matroska and as an MP4 whose moov follows its mdat.
    ffmpeg -v error -f lavfi -i testsrc2=size=1920x1080:rate=24 -f lavfi -i sine=frequency=440:sample_rate=48000 -t 60 \
        -vf noise=alls=20:allf=t -c:v libx264 -preset ultrafast -b:v 10M -maxrate 10M -bufsize 20M -pix_fmt yuv420p -c:a aac -b:a 128k "$W/media/playmkv.mkv"
    ffmpeg -v error -i "$W/media/playmkv.mkv" -c copy "$W/media/playmp4.mp4"
fi
if want B13; then
    # Two episodes of one series (the fixture takes DIR/Shows/NAME/…SnnEmm…), each a copy of that film.
    mkdir -p "$W/media/Shows/Play"
    for e in 1 2; do cp "$W/media/playmkv.mkv" "$W/media/Shows/Play/S01E0$e.mkv"; done
    chmod 644 "$W"/media/Shows/Play/*
fi
chmod 644 "$W"/media/*.*
ln "$W/media/bench.mkv" "$W/floor-big/"; ln "$W"/media/s?.mkv "$W/floor-small/"
for i in $(seq 1 "$MANY"); do : > "$W/many/m$i.mkv"; done
# The same tree on the local disk, B5's reference (with the .nfo Labstream shows beside each film).
mkdir -p "$W/local-tree"; (cd "$W/local-tree" && seq 1 "$MANY" | sed 's/^/m/' | xargs mkdir && for i in $(seq 1 "$MANY"); do : > "m$i/m$i.mkv"; : > "m$i/m$i.nfo"; done)

$FIXTURE_BIN "$W/media" > "$W/fixture.url" &
FIXTURE_PID=$!
for _ in $(seq 1 100); do [ -s "$W/fixture.url" ] && break; sleep 0.1; done
FIXTURE=$(head -n1 "$W/fixture.url")
PORT=$(( 20000 + RANDOM % 20000 ))
cat > "$W/nginx.conf" <<CONF
worker_processes 2;
daemon on;
pid $W/nginx.pid;
error_log $W/nginx-error.log;
events { worker_connections 256; }
http {
    log_format bench '\$uri "\$http_range" \$status \$body_bytes_sent';
    access_log $W/access.log bench;
    sendfile on;
    server {
        listen 127.0.0.1:$PORT;
        location ~ ^/Items/(?<id>[0-9a-f]+)/Download\$ { alias $W/media/.by-id/\$id; }
        location /media/ { alias $W/media/; autoindex on; }
        location / { proxy_pass $FIXTURE; }
    }
}
CONF
nginx -c "$W/nginx.conf" -p "$W"
URL="http://127.0.0.1:$PORT"

export LABSTREAM_CONFIG_DIR="$W/config" LABSTREAM_DATA_DIR="$W/data"
echo demo | $BIN server add jellyfin bench --url "$URL" --user demo --password-stdin >/dev/null
# The generated files are random bytes, which the playback probe would rightly reject.
printf '\n[cache]\nplayback_probe = no\n' >> "$W/config/labstream.conf"
$BIN sync >/dev/null
id_of() { basename "$(find "$W/media/.by-id" -lname "*/$1")"; }
lsfile() { echo "$LS_MNT/bench/Movies/$1/$1.mkv"; }
size_of() { stat -c %s "$W/media/$1.mkv"; }

now() { date +%s.%N; }
elapsed() { echo "$(now) - $1" | bc -l; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
daemon_pid() { head -n1 "$W/data/labstream.lock"; }
ls_mount() { $BIN mount "$LS_MNT" >/dev/null; }
ls_unmount() { $BIN unmount "$LS_MNT" >/dev/null 2>&1 || true; }
ls_cold() { ls_unmount; rm -rf "$W/data/partials"; drop_caches; ls_mount; }   # the index keeps the catalog
rc_mount() {
    rclone mount ":http:" "$RC_MNT" --http-url "$URL/media/" --vfs-cache-mode full --cache-dir "$W/rc-cache" \
        --read-only --daemon >/dev/null 2>&1
    for _ in $(seq 1 200); do mountpoint -q "$RC_MNT" && ls "$RC_MNT" >/dev/null 2>&1 && return; sleep 0.05; done
    echo "rclone did not mount" >&2; exit 1
}
rc_unmount() { fusermount3 -u "$RC_MNT" 2>/dev/null || fusermount -u "$RC_MNT" 2>/dev/null || true; pkill -f "rclone mount :http: $RC_MNT" 2>/dev/null || true
    for _ in $(seq 1 100); do mountpoint -q "$RC_MNT" || return 0; sleep 0.05; done; }
rc_cold() { rc_unmount; rm -rf "$W/rc-cache"; drop_caches; rc_mount; }
rc_pid() { pgrep -f "rclone mount :http: $RC_MNT" | head -n1; }
# floor_mount ARGS…: the floor serving ARGS (`tree N` or `files DIR`) at FL_MNT, in the background.
floor_mount() {
    "$W/floor" "$@" "$FL_MNT" & FLOOR_PID=$!
    for _ in $(seq 1 200); do mountpoint -q "$FL_MNT" && return; sleep 0.05; done
    echo "the FUSE floor did not mount" >&2; exit 1
}
floor_unmount() { fusermount3 -u "$FL_MNT"; wait "$FLOOR_PID" || true; }
# CPU time of the whole machine (every process and the kernel; not idle, iowait or steal).
HZ=$(getconf CLK_TCK); NCPU=$(nproc)
cpu_busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
# cpu_per_gb BUSY_BEFORE BYTES: core-seconds spent per GB moved since BUSY_BEFORE was read.
cpu_per_gb() { echo "($(cpu_busy) - $1) / $HZ / ($2 / 1000000000)" | bc -l; }
# What any FUSE cache that stores what it serves can reach on this machine's cores: it must at
# least receive and store each byte (curl -o FILE) and hand it through FUSE (the floor). Each
# part's cheapest run counts (this VM's noise only ever adds CPU), so the bound is generous.
cpu_bound() { echo "$NCPU * 1000 / ($1 + $2)" | bc -l; }
log_mark() { wc -l < "$W/access.log"; }
log_since() { tail -n +"$(( $1 + 1 ))" "$W/access.log"; }
# kib PID FIELD: a /proc/PID/status memory figure (VmRSS, VmHWM) in MiB.
kib() { awk -v k="$2" '$1 == k":" {print $2 / 1024}' "/proc/$1/status"; }

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
minimum() { printf '%s\n' "$@" | sort -g | head -n1; }
maximum() { printf '%s\n' "$@" | sort -g | tail -n1; }
JSON=()
ROWS=()
# record ID CASE UNIT VALUES… — one table row (median, min, max); the median is left in MED.
record() {
    local id=$1 what=$2 unit=$3; shift 3
    local med min max
    med=$(median "$@"); min=$(minimum "$@"); max=$(maximum "$@")
    ROWS+=("$(printf '%-4s %-52s %10.3f %10.3f %10.3f %-5s' "$id" "$what" "$med" "$min" "$max" "$unit")")
    JSON+=("\"$id $what\": {\"unit\": \"$unit\", \"median\": $med, \"min\": $min, \"max\": $max, \"runs\": [$(IFS=,; echo "$*")]}")
    MED=$med
}
note() { ROWS+=("     $1"); JSON+=("\"note $((${#JSON[@]}))\": \"$1\""); }
mbps() { echo "$1 / $2 / 1000000" | bc -l; }
ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }

BYTES=$(size_of bench)
BENCH_ID=$(id_of bench.mkv)
ls_mount; rc_mount

if want B1; then
echo "B1 cold sequential read, $SIZE_MB MiB"
curl -s -o /dev/null "$URL/Items/$BENCH_ID/Download"   # warm-up
C=(); L=(); R=(); K=(); F=(); LC=(); KC=(); FC=()
for i in $(seq 0 "$RUNS"); do
    drop_caches; s=$(now); curl -s -o /dev/null "$URL/Items/$BENCH_ID/Download"; c=$(mbps "$BYTES" "$(elapsed "$s")")
    ls_cold; s=$(now); b=$(cpu_busy); dd if="$(lsfile bench)" of=/dev/null bs=1M status=none; l=$(mbps "$BYTES" "$(elapsed "$s")"); lc=$(cpu_per_gb "$b" "$BYTES")
    rc_cold; s=$(now); dd if="$RC_MNT/bench.mkv" of=/dev/null bs=1M status=none; r=$(mbps "$BYTES" "$(elapsed "$s")")
    # What any cache must do at least: receive the bytes and store them (no sync, nobody reading)…
    drop_caches; s=$(now); b=$(cpu_busy); curl -s -o "$W/curl.out" "$URL/Items/$BENCH_ID/Download"; k=$(mbps "$BYTES" "$(elapsed "$s")"); kc=$(cpu_per_gb "$b" "$BYTES"); rm -f "$W/curl.out"
    # …and hand them to the reader through FUSE (the floor, serving the file from memory).
    drop_caches; floor_mount files "$W/floor-big"; s=$(now); b=$(cpu_busy); dd if="$FL_MNT/bench.mkv" of=/dev/null bs=1M status=none
    f=$(mbps "$BYTES" "$(elapsed "$s")"); fc=$(cpu_per_gb "$b" "$BYTES"); floor_unmount
    [ "$i" = 0 ] && continue   # warm-up round
    C+=("$c"); L+=("$l"); R+=("$r"); K+=("$k"); F+=("$f"); LC+=("$lc"); KC+=("$kc"); FC+=("$fc")
done
record B1 "curl (reference)" MB/s "${C[@]}"; CM=$MED; record B1 "labstream dd bs=1M" MB/s "${L[@]}"; LM=$MED; record B1 "rclone vfs full dd bs=1M" MB/s "${R[@]}"; RM=$MED
record B1 "curl -o FILE (stores the bytes, no sync)" MB/s "${K[@]}"; KM=$MED
record B1 "FUSE floor: dd of the file served from memory" MB/s "${F[@]}"
record B1 "CPU per GB: labstream" core-s "${LC[@]}"; record B1 "CPU per GB: curl -o FILE" core-s "${KC[@]}"
record B1 "CPU per GB: FUSE floor" core-s "${FC[@]}"; BOUND=$(cpu_bound "$(minimum "${KC[@]}")" "$(minimum "${FC[@]}")")
note "B1 labstream/curl $(ratio "$LM" "$CM") (target >= 0.9), rclone/curl $(ratio "$RM" "$CM"), labstream/rclone $(ratio "$LM" "$RM")"
note "B1 curl-to-a-file/curl $(ratio "$KM" "$CM"), labstream/curl-to-a-file $(ratio "$LM" "$KM")"
note "B1 store + FUSE floor on $NCPU cores: <= $(printf %.0f "$BOUND") MB/s = $(ratio "$BOUND" "$CM")x curl; labstream/bound $(ratio "$LM" "$BOUND")"
fi

if want B2; then
echo "B2 warm read of a fully cached file"
dd if="$(lsfile bench)" of=/dev/null bs=1M status=none; dd if="$RC_MNT/bench.mkv" of=/dev/null bs=1M status=none   # both hold the whole file
LS_CACHE=$(find "$W/data/partials" -type f -size +$((SIZE_MB / 2))M | head -n1)
RC_CACHE=$(find "$W/rc-cache" -type f -name bench.mkv | head -n1)
RAW=(); L1=(); L2=(); R1=(); R2=(); RAW2=()
for i in $(seq 1 "$RUNS"); do
    drop_caches; s=$(now); dd if="$LS_CACHE" of=/dev/null bs=1M status=none; RAW+=("$(mbps "$BYTES" "$(elapsed "$s")")")
    s=$(now); dd if="$LS_CACHE" of=/dev/null bs=1M status=none; RAW2+=("$(mbps "$BYTES" "$(elapsed "$s")")")
    drop_caches; s=$(now); dd if="$(lsfile bench)" of=/dev/null bs=1M status=none; L1+=("$(mbps "$BYTES" "$(elapsed "$s")")")
    s=$(now); dd if="$(lsfile bench)" of=/dev/null bs=1M status=none; L2+=("$(mbps "$BYTES" "$(elapsed "$s")")")
    drop_caches; s=$(now); dd if="$RC_MNT/bench.mkv" of=/dev/null bs=1M status=none; R1+=("$(mbps "$BYTES" "$(elapsed "$s")")")
    s=$(now); dd if="$RC_MNT/bench.mkv" of=/dev/null bs=1M status=none; R2+=("$(mbps "$BYTES" "$(elapsed "$s")")")
done
record B2 "raw dd of the cache file, cold page cache" MB/s "${RAW[@]}"; RAWM=$MED
record B2 "raw dd of the cache file, second read" MB/s "${RAW2[@]}"; RAW2M=$MED
record B2 "labstream first read" MB/s "${L1[@]}"; L1M=$MED; record B2 "labstream second read" MB/s "${L2[@]}"; L2M=$MED
record B2 "rclone first read" MB/s "${R1[@]}"; R1M=$MED; record B2 "rclone second read" MB/s "${R2[@]}"; R2M=$MED
note "B2 labstream/raw first $(ratio "$L1M" "$RAWM") (target >= 0.35), second $(ratio "$L2M" "$RAW2M") (target >= 0.8); rclone/raw $(ratio "$R1M" "$RAWM"), $(ratio "$R2M" "$RAW2M")"
fi

if want B3; then
echo "B3 cold tail seek: 64 KiB at EOF-1 MiB"
SKIP=$(( (BYTES - 1048576) / 65536 ))
L=(); R=(); LREQ=(); LBYTES=(); RBYTES=()
for i in $(seq 1 "$RUNS"); do
    ls_cold; m=$(log_mark); s=$(now); dd if="$(lsfile bench)" of=/dev/null bs=64k count=1 skip="$SKIP" status=none; L+=("$(echo "$(elapsed "$s") * 1000" | bc -l)")
    LREQ+=("$(log_since "$m" | grep -c "/Items/$BENCH_ID/Download" || true)")
    LBYTES+=("$(log_since "$m" | awk -v id="$BENCH_ID" '$1 ~ id {b += $NF} END {print b / 1048576}')")
    rc_cold; m=$(log_mark); s=$(now); dd if="$RC_MNT/bench.mkv" of=/dev/null bs=64k count=1 skip="$SKIP" status=none; R+=("$(echo "$(elapsed "$s") * 1000" | bc -l)")
    RBYTES+=("$(log_since "$m" | awk '$1 ~ /bench.mkv/ {b += $NF} END {print b / 1048576}')")
done
record B3 "labstream latency" ms "${L[@]}"; LM=$MED; record B3 "rclone latency" ms "${R[@]}"; RM=$MED
record B3 "labstream requests" count "${LREQ[@]}"
record B3 "labstream MiB fetched" MiB "${LBYTES[@]}" 
record B3 "rclone MiB fetched" MiB "${RBYTES[@]}"
note "B3 labstream/rclone latency $(ratio "$LM" "$RM") (target <= 1, one request, <= 1 MiB)"
fi

if want B4; then
echo "B4 mpv and ffprobe on an uncached 60 s 1080p file"
MPV=(mpv --no-config --really-quiet --vo=null --ao=null --untimed --cache=no)
LOC=(); L=(); R=(); FLOC=(); FL=(); FR=()
for i in $(seq 0 "$RUNS"); do
    drop_caches; s=$(now); "${MPV[@]}" "$W/media/clip.mkv"; a=$(elapsed "$s")
    ls_cold; s=$(now); "${MPV[@]}" "$(lsfile clip)"; b=$(elapsed "$s")
    rc_cold; s=$(now); "${MPV[@]}" "$RC_MNT/clip.mkv"; c=$(elapsed "$s")
    drop_caches; s=$(now); ffprobe -v error "$W/media/clip.mkv"; d=$(elapsed "$s")
    ls_cold; s=$(now); ffprobe -v error "$(lsfile clip)"; e=$(elapsed "$s")
    rc_cold; s=$(now); ffprobe -v error "$RC_MNT/clip.mkv"; f=$(elapsed "$s")
    [ "$i" = 0 ] && continue
    LOC+=("$a"); L+=("$b"); R+=("$c"); FLOC+=("$d"); FL+=("$e"); FR+=("$f")
done
record B4 "mpv local file" s "${LOC[@]}"; A=$MED; record B4 "mpv labstream" s "${L[@]}"; B=$MED; record B4 "mpv rclone" s "${R[@]}"; Cc=$MED
record B4 "ffprobe local file" s "${FLOC[@]}"; D=$MED; record B4 "ffprobe labstream" s "${FL[@]}"; E=$MED; record B4 "ffprobe rclone" s "${FR[@]}"; F=$MED
note "B4 mpv labstream/local $(ratio "$B" "$A") (target <= 1.05), rclone/local $(ratio "$Cc" "$A"); ffprobe labstream/local $(ratio "$E" "$D") (target <= 1.2), rclone/local $(ratio "$F" "$D")"
fi

if want B12; then
echo "B12 play start: mpv's first 60 frames of a cold 77 MB film, with --cache=no"
# --no-audio: with a null audio output mpv still plays the sound in real time (60 frames took
# the 2.5 s they last, on every contender alike), which hid the reading in the decoding.
PLAY=(mpv --no-config --really-quiet --vo=null --no-audio --untimed --cache=no --frames=60)
# MiB of FILE's downloads the access log shows since line MARK (FILE: an id for Labstream, a name for rclone).
mib_since() { log_since "$1" | awk -v f="$2" '$1 ~ f {b += $NF} END {print b / 1048576}'; }
for ext in mkv mp4; do
    ID=$(id_of "play$ext.$ext"); LSF="$LS_MNT/bench/Movies/play$ext/play$ext.$ext"
    LOC=(); L=(); R=(); LB=(); RB=(); PB=()
    for i in $(seq 0 "$RUNS"); do
        drop_caches; s=$(now); "${PLAY[@]}" "$W/media/play$ext.$ext"; a=$(elapsed "$s")
        ls_cold; m=$(log_mark); s=$(now); "${PLAY[@]}" "$LSF"; b=$(elapsed "$s"); ls_unmount; lb=$(mib_since "$m" "$ID")
        rc_cold; m=$(log_mark); s=$(now); "${PLAY[@]}" "$RC_MNT/play$ext.$ext"; c=$(elapsed "$s"); rc_unmount; rb=$(mib_since "$m" "play$ext")
        ls_cold; m=$(log_mark); ffprobe -v error "$LSF"; ls_unmount; pb=$(mib_since "$m" "$ID")
        [ "$i" = 0 ] && continue
        LOC+=("$a"); L+=("$b"); R+=("$c"); LB+=("$lb"); RB+=("$rb"); PB+=("$pb")
    done
    record B12 "$ext: mpv 60 frames, local file" s "${LOC[@]}"; A=$MED
    record B12 "$ext: mpv 60 frames, labstream" s "${L[@]}"; B=$MED
    record B12 "$ext: mpv 60 frames, rclone" s "${R[@]}"; Cc=$MED
    record B12 "$ext: MiB fetched, labstream" MiB "${LB[@]}"; LBM=$MED
    record B12 "$ext: MiB fetched, rclone" MiB "${RB[@]}"; RBM=$MED
    record B12 "$ext: MiB fetched by ffprobe, labstream" MiB "${PB[@]}"
    note "B12 $ext labstream/local $(ratio "$B" "$A") (target <= 1.1), rclone/local $(ratio "$Cc" "$A"); MiB fetched labstream/rclone $(ratio "$LBM" "$RBM") (target <= 1)"
done
ls_mount; rc_mount
fi

if want B13; then
echo "B13 the next episode: mpv's first 60 frames of episode 2, cold, and after episode 1 was played"
PLAY=(mpv --no-config --really-quiet --vo=null --no-audio --untimed --cache=no --frames=60)
mib_since() { log_since "$1" | awk -v f="$2" '$1 ~ f {b += $NF} END {print b / 1048576}'; }
ID2=$(id_of "S01E02.mkv")
episode() { find "$LS_MNT/bench" -name "*S01E0$1*.mkv" | head -n1; }
present() { $BIN status --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0].get("bytes_present", 0))'; }
LOC=(); COLD=(); NEXT=(); NB=(); PF=()
for i in $(seq 0 "$RUNS"); do
    drop_caches; s=$(now); "${PLAY[@]}" "$W/media/Shows/Play/S01E02.mkv"; a=$(elapsed "$s")
    ls_cold; m=$(log_mark); s=$(now); "${PLAY[@]}" "$(episode 2)"; c=$(elapsed "$s")
    ls_cold; E1=$(episode 1); E2=$(episode 2)
    # Episode 1 played: a sustained sequential read of one handle, kept open until what is
    # fetched ahead of episode 2 stops growing (the bench polls; the tests synchronise).
    exec 3<"$E1"; dd bs=1M count=48 of=/dev/null <&3 2>/dev/null
    last=-1; cur=$(present "$E2")
    for _ in $(seq 1 100); do [ "$cur" -gt 0 ] && [ "$cur" = "$last" ] && break; sleep 0.2; last=$cur; cur=$(present "$E2"); done
    exec 3<&-
    m=$(log_mark); s=$(now); "${PLAY[@]}" "$E2"; b=$(elapsed "$s"); nb=$(mib_since "$m" "$ID2"); ls_unmount
    [ "$i" = 0 ] && continue
    LOC+=("$a"); COLD+=("$c"); NEXT+=("$b"); NB+=("$nb"); PF+=("$(echo "$cur / 1048576" | bc -l)")
done
record B13 "mpv 60 frames of episode 2, local file" s "${LOC[@]}"; A=$MED
record B13 "labstream, cold (nothing fetched ahead)" s "${COLD[@]}"; C=$MED
record B13 "labstream, after episode 1 was played" s "${NEXT[@]}"; B=$MED
record B13 "MiB fetched ahead while episode 1 played" MiB "${PF[@]}"
record B13 "MiB fetched at episode 2's start after that" MiB "${NB[@]}"
note "B13 next episode labstream/local $(ratio "$B" "$A") (target <= 1.05), cold labstream/local $(ratio "$C" "$A")"
fi

if want B6; then
echo "B6 bytes fetched again after kill -9 during a pinned download"
SEG=$(( 16 * 1048576 ))
REFETCH=(); QUEUED=()
for i in $(seq 1 "$RUNS"); do
    ls_cold; m=$(log_mark)
    $BIN pin "$(lsfile bench)" >/dev/null
    while :; do
        have=$(getfattr --only-values -n user.labstream.bytes "$(lsfile bench)" 2>/dev/null | cut -d/ -f1)
        [ "${have:-0}" -gt $(( BYTES / 2 )) ] && break
        sleep 0.02
    done
    # Bytes nginx has counted as sent that no daemon can have seen: the kernel's socket queues.
    QUEUED+=("$(ss -tnH state established "( sport = :$PORT or dport = :$PORT )" | awk '{q += $1 + $2} END {print q / 1048576}')")
    pid=$(daemon_pid); kill -9 "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.02; done
    fusermount3 -uz "$LS_MNT" 2>/dev/null || true
    ls_mount; $BIN pin --wait "$(lsfile bench)" >/dev/null; $BIN unpin "$(lsfile bench)" >/dev/null
    sent=$(log_since "$m" | awk -v id="$BENCH_ID" '$1 ~ id {b += $NF} END {printf "%d", b}')
    REFETCH+=("$(echo "($sent - $BYTES) / 1048576" | bc -l)")
done
record B6 "MiB fetched twice (segment = 16 MiB)" MiB "${REFETCH[@]}"; RF=$MED
record B6 "in socket queues at the kill (sent, never read)" MiB "${QUEUED[@]}"
note "B6 refetched $(ratio "$RF" 16) segments per file (target <= 1)"
fi

if want B9 || want B7; then
echo "B9 and B7: concurrent cold readers of different files"
for n in 4 8; do
    TOTAL=$(( n * SMALL_MB * 1048576 ))
    b9_reset() { C=(); L=(); R=(); K=(); F=(); LC=(); KC=(); FC=(); LRSS=(); RRSS=(); }
    b9_reset
    FILES=(); for k in $(seq 1 "$n"); do FILES+=("s$k.mkv"); done
    for i in $(seq 0 "$RUNS"); do   # round 0 warms up and is dropped
        drop_caches; s=$(now)
        P=(); for k in $(seq 1 "$n"); do curl -s -o /dev/null "$URL/Items/$(id_of "s$k.mkv")/Download" & P+=($!); done; wait "${P[@]}"
        C+=("$(mbps "$TOTAL" "$(elapsed "$s")")")
        drop_caches; s=$(now); b=$(cpu_busy)
        P=(); for k in $(seq 1 "$n"); do curl -s -o "$W/curl$k.out" "$URL/Items/$(id_of "s$k.mkv")/Download" & P+=($!); done; wait "${P[@]}"
        K+=("$(mbps "$TOTAL" "$(elapsed "$s")")"); KC+=("$(cpu_per_gb "$b" "$TOTAL")"); rm -f "$W"/curl*.out
        drop_caches; mkdir -p "$W/floor-n"; rm -f "$W"/floor-n/*; for f in "${FILES[@]}"; do ln "$W/floor-small/$f" "$W/floor-n/"; done
        floor_mount files "$W/floor-n"; s=$(now); b=$(cpu_busy)
        P=(); for f in "${FILES[@]}"; do dd if="$FL_MNT/$f" of=/dev/null bs=1M status=none & P+=($!); done; wait "${P[@]}"
        F+=("$(mbps "$TOTAL" "$(elapsed "$s")")"); FC+=("$(cpu_per_gb "$b" "$TOTAL")"); floor_unmount
        ls_cold; s=$(now); b=$(cpu_busy)
        P=(); for k in $(seq 1 "$n"); do dd if="$(lsfile "s$k")" of=/dev/null bs=1M status=none & P+=($!); done; wait "${P[@]}"
        L+=("$(mbps "$TOTAL" "$(elapsed "$s")")"); LC+=("$(cpu_per_gb "$b" "$TOTAL")"); LRSS+=("$(awk '/VmHWM/ {print $2 / 1024}' "/proc/$(daemon_pid)/status")")
        rc_cold; s=$(now)
        P=(); for k in $(seq 1 "$n"); do dd if="$RC_MNT/s$k.mkv" of=/dev/null bs=1M status=none & P+=($!); done; wait "${P[@]}"
        R+=("$(mbps "$TOTAL" "$(elapsed "$s")")"); RRSS+=("$(awk '/VmHWM/ {print $2 / 1024}' "/proc/$(rc_pid)/status")")
        [ "$i" = 0 ] && b9_reset
    done
    record B9 "$n curls in parallel, aggregate" MB/s "${C[@]}"; CM=$MED; record B9 "labstream $n readers, aggregate" MB/s "${L[@]}"; LM=$MED
    record B9 "rclone $n readers, aggregate" MB/s "${R[@]}"; RM=$MED
    record B9 "$n curls -o FILE in parallel (store, no sync)" MB/s "${K[@]}"; KM=$MED
    record B9 "FUSE floor: $n readers of files served from memory" MB/s "${F[@]}"
    record B9 "CPU per GB: labstream, $n readers" core-s "${LC[@]}"; record B9 "CPU per GB: $n curls -o FILE" core-s "${KC[@]}"
    record B9 "CPU per GB: FUSE floor, $n readers" core-s "${FC[@]}"; BOUND=$(cpu_bound "$(minimum "${KC[@]}")" "$(minimum "${FC[@]}")")
    note "B9 $n readers labstream/curls $(ratio "$LM" "$CM") (target >= 0.8), rclone/curls $(ratio "$RM" "$CM")"
    note "B9 $n curls-to-files/curls $(ratio "$KM" "$CM"), labstream/curls-to-files $(ratio "$LM" "$KM")"
    note "B9 $n store + FUSE floor on $NCPU cores: <= $(printf %.0f "$BOUND") MB/s = $(ratio "$BOUND" "$CM")x curls; labstream/bound $(ratio "$LM" "$BOUND")"
    record B7 "labstream daemon peak RSS, $n cold streams" MiB "${LRSS[@]}"; LR=$MED; record B7 "rclone peak RSS, $n cold streams" MiB "${RRSS[@]}"; RR=$MED
    [ "$n" = 4 ] && note "B7 labstream/rclone peak RSS $(ratio "$LR" "$RR") (target <= 100 MiB)"
done
rc_unmount
fi

if want B8; then
echo "B8 pinned download of a $SIZE_MB MiB file"
C=(); L=(); D=(); FD=(); PR=(); PF=()
for i in $(seq 0 "$RUNS"); do
    drop_caches; s=$(now); curl -s -o /dev/null "$URL/Items/$BENCH_ID/Download"; c=$(mbps "$BYTES" "$(elapsed "$s")")
    ls_cold; s=$(now); $BIN pin --wait "$(lsfile bench)" >/dev/null; l=$(mbps "$BYTES" "$(elapsed "$s")"); $BIN unpin "$(lsfile bench)" >/dev/null
    r=$(awk '/VmHWM/ {print $2 / 1024}' "/proc/$(daemon_pid)/status")   # the daemon is fresh: its peak is this pin's
    s=$(now); dd if=/dev/zero of="$W/ddtest" bs=1M count="$SIZE_MB" conv=fdatasync status=none; d=$(mbps "$BYTES" "$(elapsed "$s")"); rm -f "$W/ddtest"
    # A plain durable download: curl to a file, then fdatasync it (what "keep a copy" costs).
    drop_caches; s=$(now); curl -s -o "$W/curl.out" "$URL/Items/$BENCH_ID/Download"; dd if=/dev/null of="$W/curl.out" conv=fdatasync,notrunc status=none
    f=$(mbps "$BYTES" "$(elapsed "$s")"); rm -f "$W/curl.out"
    # The same durability (2 MiB synced checkpoints, two bodies, 16 MiB segments) and nothing else.
    drop_caches; s=$(now); "$W/pinfloor" "$URL/Items/$BENCH_ID/Download" "$BYTES" "$W/pinfloor.out"; p=$(mbps "$BYTES" "$(elapsed "$s")"); rm -f "$W/pinfloor.out"
    [ "$i" = 0 ] && continue
    C+=("$c"); L+=("$l"); D+=("$d"); FD+=("$f"); PR+=("$r"); PF+=("$p")
done
record B8 "curl -o /dev/null (reference)" MB/s "${C[@]}"; CM=$MED; record B8 "labstream pin --wait" MB/s "${L[@]}"; LM=$MED
record B8 "disk ceiling: dd conv=fdatasync" MB/s "${D[@]}"; DM=$MED
record B8 "curl -o FILE, then fdatasync" MB/s "${FD[@]}"; FM=$MED
record B8 "pin floor (bench/pinfloor.c)" MB/s "${PF[@]}"; PFM=$MED
record B8 "labstream daemon peak RSS during the pin" MiB "${PR[@]}"; PM=$MED
note "B8 labstream/curl $(ratio "$LM" "$CM") (target >= 0.9), labstream/(curl to a synced file) $(ratio "$LM" "$FM"), labstream/disk ceiling $(ratio "$LM" "$DM"), labstream/pin floor $(ratio "$LM" "$PFM") (floor/curl $(ratio "$PFM" "$CM")), peak RSS $PM MiB (target < 100 MB)"
ls_unmount
fi

if want B5; then
echo "B5 find over a $MANY-item library, online and offline"
export LABSTREAM_CONFIG_DIR="$W/many-config" LABSTREAM_DATA_DIR="$W/many-data"
$FIXTURE_BIN "$W/many" > "$W/many.url" &
MANY_PID=$!
for _ in $(seq 1 100); do [ -s "$W/many.url" ] && break; sleep 0.1; done
echo demo | $BIN server add jellyfin many --url "$(head -n1 "$W/many.url")" --user demo --password-stdin >/dev/null
$BIN sync >/dev/null
ON=(); OFF=(); WARM=()
for i in $(seq 1 "$RUNS"); do
    $BIN mount "$W/many-mnt" >/dev/null; drop_caches
    s=$(now); n=$(find "$W/many-mnt" | wc -l); ON+=("$(elapsed "$s")")
    s=$(now); find "$W/many-mnt" >/dev/null; WARM+=("$(elapsed "$s")")   # the kernel's caches now hold the tree
    $BIN unmount "$W/many-mnt" >/dev/null
done
kill "$MANY_PID"; wait "$MANY_PID" 2>/dev/null || true; MANY_PID=
FLOOR=(); LOCAL=()
for i in $(seq 1 "$RUNS"); do
    $BIN mount "$W/many-mnt" >/dev/null; drop_caches
    s=$(now); n=$(find "$W/many-mnt" | wc -l); OFF+=("$(elapsed "$s")")
    $BIN unmount "$W/many-mnt" >/dev/null
    # The same tree from the FUSE floor: what the FUSE protocol and this kernel cost by themselves.
    floor_mount tree "$MANY"; drop_caches
    s=$(now); find "$FL_MNT" >/dev/null; FLOOR+=("$(elapsed "$s")")
    floor_unmount
    drop_caches; s=$(now); find "$W/local-tree" >/dev/null; LOCAL+=("$(elapsed "$s")")
done
record B5 "find, server online ($n entries)" s "${ON[@]}"; ONM=$MED
record B5 "find, server offline" s "${OFF[@]}"; OFFM=$MED
record B5 "find again, kernel caches warm" s "${WARM[@]}"
record B5 "FUSE floor: find over $MANY folders of one file" s "${FLOOR[@]}"; FLM=$MED
record B5 "local disk: the same tree, cold" s "${LOCAL[@]}"; LOM=$MED
note "B5 target <= 0.3 s each; labstream/floor online $(ratio "$ONM" "$FLM"), offline $(ratio "$OFFM" "$FLM"); labstream/local disk online $(ratio "$ONM" "$LOM"), offline $(ratio "$OFFM" "$LOM")"
fi

if want B10; then
echo "B10 a household's library: $BIG_FILMS films and $BIG_SERIES series × 50 episodes"
export LABSTREAM_CONFIG_DIR="$W/big-config" LABSTREAM_DATA_DIR="$W/big-data"
B=$W/big; BM=$W/big-mnt; mkdir -p "$B/Shows" "$BM"
python3 - "$B" "$BIG_FILMS" "$BIG_SERIES" <<'PY'
import os, sys
d, films, series = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(films): open(f"{d}/film{i:06d}.mkv", "w").close()
for s in range(series):
    p = f"{d}/Shows/Show {s:03d}"; os.makedirs(p, exist_ok=True)
    for season in range(1, 6):
        for e in range(1, 11): open(f"{p}/S{season:02d}E{e:02d}.mkv", "w").close()
PY
# 20 films with bytes, for 20 readers at once.
for i in $(seq 0 19); do dd if=/dev/urandom of="$B/film$(printf %06d "$i").mkv" bs=1M count=32 status=none; done
$FIXTURE_BIN "$B" > "$W/big.url" &
BIG_PID=$!
until [ -s "$W/big.url" ]; do kill -0 "$BIG_PID" || exit 1; sleep 0.5; done   # 100 000 items take a while
echo demo | $BIN server add jellyfin big --url "$(head -n1 "$W/big.url")" --user demo --password-stdin >/dev/null
printf '\n[cache]\nplayback_probe = no\nrefresh_interval = 0\n' >> "$W/big-config/labstream.conf"
big_pid() { head -n1 "$W/big-data/labstream.lock"; }
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
s=$(now); $BIN mount "$BM" >/dev/null; record B10 "first mount, sync included" s "$(elapsed "$s")"
record B10 "daemon RSS after the first mount" MiB "$(kib "$(big_pid)" VmRSS)"
record B10 "daemon peak RSS during the first mount" MiB "$(kib "$(big_pid)" VmHWM)"
s=$(now); $BIN sync >/dev/null; record B10 "sync with nothing changed (incremental)" s "$(elapsed "$s")"; INC=$MED
record B10 "daemon peak RSS after the incremental sync" MiB "$(kib "$(big_pid)" VmHWM)"
s=$(now); $BIN sync --full >/dev/null; record B10 "sync --full" s "$(elapsed "$s")"; FULL=$MED
note "B10 target: incremental sync <= 10 % of a full one; here $(ratio "$INC" "$FULL")"
record B10 "daemon peak RSS after both syncs" MiB "$(kib "$(big_pid)" VmHWM)"
# The same tree on the local disk: every folder and (empty) file the mount shows.
(cd "$BM" && find . -type d) | (cd "$W" && mkdir -p big-local && cd big-local && xargs -d '\n' mkdir -p)
(cd "$BM" && find . -type f) | (cd "$W/big-local" && xargs -d '\n' touch)
n=$(find "$BM" | wc -l)
drop_caches; p=$(big_pid); c=$(cpu_of "$p"); s=$(now); find "$BM" >/dev/null; record B10 "cold find ($n entries)" s "$(elapsed "$s")"; COLD=$MED
s=$(now); c=$(cpu_of "$p"); find "$BM" >/dev/null; record B10 "warm find" s "$(elapsed "$s")"; WARMF=$MED
record B10 "daemon CPU during the warm find" s "$(echo "($(cpu_of "$p") - $c) / $HZ" | bc -l)"
# The kernel marks a folder's atime stale after each listing it fetched from the daemon (on any
# writable FUSE mount), so the second walk asks one GETATTR per folder; the third is all cache
# (the offline walks below are on a read-only mount, where the second is all cache too).
s=$(now); c=$(cpu_of "$p"); find "$BM" >/dev/null; record B10 "third find" s "$(elapsed "$s")"; THIRDF=$MED
record B10 "daemon CPU during the third find" s "$(echo "($(cpu_of "$p") - $c) / $HZ" | bc -l)"
drop_caches; s=$(now); find "$W/big-local" >/dev/null; record B10 "local disk: the same tree, cold" s "$(elapsed "$s")"; LCOLD=$MED
s=$(now); find "$W/big-local" >/dev/null; record B10 "local disk: the same tree, warm" s "$(elapsed "$s")"; LWARM=$MED
note "B10 find/local disk: cold $(ratio "$COLD" "$LCOLD") (target <= 1.3), warm $(ratio "$WARMF" "$LWARM"), third $(ratio "$THIRDF" "$LWARM") (target <= 1.5)"
# 20 readers of 20 different cold films at once: the aggregate, and the longest wait between two
# chunks that any reader saw.
drop_caches
python3 - "$BM/big/Movies" > "$W/readers.out" <<'PY'
import os, sys, threading, time
root = sys.argv[1]
names = [f"film{i:06d}" for i in range(20)]
stalls, sizes = [0.0] * 20, [0] * 20
def read(i):
    with open(f"{root}/{names[i]}/{names[i]}.mkv", "rb", buffering=0) as f:
        last = time.monotonic()
        while True:
            b = f.read(1 << 20)
            t = time.monotonic(); stalls[i] = max(stalls[i], t - last); last = t
            if not b: break
            sizes[i] += len(b)
start = time.monotonic()
threads = [threading.Thread(target=read, args=(i,)) for i in range(20)]
for t in threads: t.start()
for t in threads: t.join()
wall = time.monotonic() - start
print(sum(sizes) / wall / 1e6, max(stalls))
PY
record B10 "20 cold readers at once: aggregate" MB/s "$(cut -d' ' -f1 "$W/readers.out")"
record B10 "20 cold readers: the longest stall of any reader" s "$(cut -d' ' -f2 "$W/readers.out")"
record B10 "daemon peak RSS online (all of the above)" MiB "$(kib "$(big_pid)" VmHWM)"
# A server-wide metadata refresh (every item saved anew, new dates and tags), then the sync that
# reads it: its own peak (VmHWM reset first) against the first mount's, and the daemon at rest after.
kill -USR1 "$BIG_PID"; until grep -q '^touched' "$W/big.url"; do kill -0 "$BIG_PID" || exit 1; sleep 0.2; done
echo 5 > "/proc/$(big_pid)/clear_refs" 2>/dev/null || note "B10: VmHWM could not be reset; the next peak is the daemon's whole life's"
s=$(now); $BIN sync >/dev/null; record B10 "sync with every item changed (incremental)" s "$(elapsed "$s")"
record B10 "daemon peak RSS during the every-item-changed sync" MiB "$(kib "$(big_pid)" VmHWM)"
sleep 25   # the heap is trimmed on the first quiet 10 s tick after a burst
record B10 "daemon RSS at rest after it" MiB "$(kib "$(big_pid)" VmRSS)"
$BIN unmount "$BM" >/dev/null
kill "$BIG_PID"; wait "$BIG_PID" 2>/dev/null || true; BIG_PID=
# Offline, as the issue measured, and read-only (-o ro): on a writable FUSE mount the kernel marks
# each folder's atime stale when it fetches its listing, so the second walk above asked one GETATTR
# per folder; a read-only superblock keeps them.
s=$(now); $BIN mount "$BM" -o ro >/dev/null; record B10 "offline mount of the index (-o ro)" s "$(elapsed "$s")"
p=$(big_pid)
# The local disk again, right beside these walks: this machine's speed drifts over minutes.
drop_caches; s=$(now); find "$W/big-local" >/dev/null; record B10 "local disk again: cold" s "$(elapsed "$s")"; LCOLD=$MED
s=$(now); find "$W/big-local" >/dev/null; record B10 "local disk again: warm" s "$(elapsed "$s")"; LWARM=$MED
drop_caches; s=$(now); find "$BM" >/dev/null; record B10 "offline ro: cold find" s "$(elapsed "$s")"; COLD=$MED
s=$(now); c=$(cpu_of "$p"); find "$BM" >/dev/null; record B10 "offline ro: second find" s "$(elapsed "$s")"; WARMF=$MED
record B10 "offline ro: daemon CPU during the second find" s "$(echo "($(cpu_of "$p") - $c) / $HZ" | bc -l)"
s=$(now); find "$BM" >/dev/null; record B10 "offline ro: third find" s "$(elapsed "$s")"; THIRDF=$MED
note "B10 offline ro find/local disk: cold $(ratio "$COLD" "$LCOLD") (target <= 1.3), second $(ratio "$WARMF" "$LWARM") (target <= 1.5), third $(ratio "$THIRDF" "$LWARM")"
sleep 25   # at rest: the daemon trims its heap on the first quiet 10 s tick after a burst
record B10 "daemon RSS at rest offline, after a find" MiB "$(kib "$(big_pid)" VmRSS)"
record B10 "daemon peak RSS offline" MiB "$(kib "$(big_pid)" VmHWM)"
record B10 "index on disk" MiB "$(du -sm "$W/big-data/index.sqlite" | cut -f1)"
$BIN unmount "$BM" >/dev/null
fi

if want B11; then
for N in $SILO_SIZES; do
echo "B11 a Silo household: $N items"
export LABSTREAM_CONFIG_DIR="$W/silo$N-config" LABSTREAM_DATA_DIR="$W/silo$N-data"
S=$W/silo$N; SM=$W/silo$N-mnt; mkdir -p "$S/Shows" "$SM"
# As B10's library: nine in ten items films, the rest episodes of series of 5 seasons × 10.
python3 - "$S" $((N * 9 / 10)) $(( (N / 10 + 49) / 50 )) <<'GEN'
import os, sys
d, films, series = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(films): open(f"{d}/film{i:06d}.mkv", "w").close()
for s in range(series):
    p = f"{d}/Shows/Show {s:03d}"; os.makedirs(p, exist_ok=True)
    for season in range(1, 6):
        for e in range(1, 11): open(f"{p}/S{season:02d}E{e:02d}.mkv", "w").close()
GEN
rm -f "$W/silo.url"   # the last size's, still there: the wait below would read it
$FIXTURE_BIN --silo "$S" > "$W/silo.url" &
SILO_PID=$!
until [ -s "$W/silo.url" ]; do kill -0 "$SILO_PID" || exit 1; sleep 0.5; done
echo demo | $BIN server add silo silo --url "$(head -n1 "$W/silo.url")" --user demo --password-stdin >/dev/null
printf '\n[cache]\nplayback_probe = no\nrefresh_interval = 0\n' >> "$LABSTREAM_CONFIG_DIR/labstream.conf"
silo_pid() { head -n1 "$LABSTREAM_DATA_DIR/labstream.lock"; }
# What the fixture was asked since the last call: "requests N versions V seasons S".
silo_asked() { local n; n=$(wc -l < "$W/silo.url"); kill -USR1 "$SILO_PID"; until [ "$(wc -l < "$W/silo.url")" -gt "$n" ]; do sleep 0.1; done; tail -n1 "$W/silo.url"; }
silo_asked >/dev/null   # the sign-in's
s=$(now); $BIN mount "$SM" >/dev/null; record B11 "$N items: first mount, sync included" s "$(elapsed "$s")"
note "B11 $N first sync asked: $(silo_asked) (a version read per film: /api/v2 reads many items' versions nowhere)"
record B11 "$N items: daemon RSS after the first mount" MiB "$(kib "$(silo_pid)" VmRSS)"
record B11 "$N items: daemon peak RSS during the first mount" MiB "$(kib "$(silo_pid)" VmHWM)"
echo 5 > "/proc/$(silo_pid)/clear_refs" 2>/dev/null || true
s=$(now); $BIN sync >/dev/null; record B11 "$N items: sync with nothing changed (incremental)" s "$(elapsed "$s")"; INC=$MED
note "B11 $N unchanged sync asked: $(silo_asked)"
record B11 "$N items: daemon peak RSS during the incremental sync" MiB "$(kib "$(silo_pid)" VmHWM)"
echo 5 > "/proc/$(silo_pid)/clear_refs" 2>/dev/null || true
s=$(now); $BIN sync --full >/dev/null; record B11 "$N items: sync --full" s "$(elapsed "$s")"; FULL=$MED
note "B11 $N target: incremental sync <= 10 % of a full one; here $(ratio "$INC" "$FULL"); the full one asked: $(silo_asked)"
record B11 "$N items: daemon peak RSS during sync --full" MiB "$(kib "$(silo_pid)" VmHWM)"
n=$(find "$SM" | wc -l)
drop_caches; s=$(now); find "$SM" >/dev/null; record B11 "$N items: cold find ($n entries)" s "$(elapsed "$s")"
$BIN unmount "$SM" >/dev/null
kill "$SILO_PID"; wait "$SILO_PID" 2>/dev/null || true; SILO_PID=
done
fi

printf '\n%-4s %-52s %10s %10s %10s %-5s\n' id "case ($RUNS runs)" median min max unit
printf '%s\n' "${ROWS[@]}"
{ echo "{"; (IFS=$'\n'; echo "${JSON[*]}" | sed '$!s/$/,/'); echo "}"; } > bench/results.json
echo "wrote bench/results.json"

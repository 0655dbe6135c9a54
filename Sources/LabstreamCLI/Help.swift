import LabstreamBackends

/// Every help text, verbatim; tests compare against these.
enum Help {
    static let main = """
        labstream \(LabstreamVersion.current) — mount your home media servers' libraries as a read-only filesystem.

        Usage:
          labstream server add jellyfin|emby NAME --url URL --user USER --password-stdin
          labstream server add jellyfin|emby NAME --url URL [--user USER] --token-stdin
          labstream server add plex NAME --pin [--server NAME] [--url URL] [--plex-tv-url URL]
          labstream server add plex NAME --token-stdin [--server NAME] [--url URL] [--plex-tv-url URL]
          labstream server add silo NAME --url URL [--device | --user USER --password-stdin | --token-stdin] [--profile NAME [--pin-stdin]]
          labstream server list [--json]
          labstream server remove NAME [--delete-files]
          labstream mount MOUNTPOINT [--foreground] [-o OPTIONS]
          labstream unmount MOUNTPOINT
          labstream status [PATH…] [--json] [--watch]
          labstream sync [NAME] [--full]
          labstream pin PATH… [--quality Q] [--priority P] [--wait] [--json]
          labstream unpin PATH…
          labstream pause|resume|retry|cancel|verify PATH…
          labstream pause-all | resume-all
          labstream queue [--json]
          labstream queue move PATH --first | --before OTHER
          labstream priority PATH… high|normal|low
          labstream monitor add SERIES-FOLDER --mode MODE [--delete-watched] [--max-storage SIZE]
          labstream monitor set SERIES-FOLDER [--mode MODE] [--delete-watched|--keep-watched] [--max-storage SIZE|--no-max-storage]
          labstream monitor remove SERIES-FOLDER | SERVER/SERIES-ID
          labstream monitor list [--json]
          labstream repair
          labstream orphans [--purge [PATH…]]
          labstream demo [MOUNTPOINT]

        Global options (anywhere on the line):
          --config-dir DIR   configuration (default $LABSTREAM_CONFIG_DIR, $XDG_CONFIG_HOME/labstream, /etc/labstream for root)
          --data-dir DIR     index, partial files, log (default $LABSTREAM_DATA_DIR, $XDG_DATA_HOME/labstream, /var/lib/labstream for root)
          --log-level LEVEL  error, warning, info (default) or debug; -v, --verbose is debug.
                             The daemon logs to DATA_DIR/labstream.log (rotated by size: log_max_size,
                             log_files in labstream.conf's [daemon]) and syslog (the journal);
                             in the foreground, to stderr. Secrets in a line are masked.
          -h, --help         this text; `labstream COMMAND --help` for one command

        Exit status follows sysexits(3): 64 bad usage, 65 the path cannot take the request (a generated
        .nfo given to pin), 66 no such input, 69 server unavailable, 74 local I/O error, 75 try again
        later, 76 server protocol error, 77 permission or login refused, 78 bad configuration.

        A status page and JSON API for the house: add [http] with listen = 127.0.0.1:8280 (or
        listen = unix:/PATH) to labstream.conf; the mounted daemon then serves both, every API call
        with the token in DATA_DIR/http.token. See labstream-http(7).
        See labstream(1) and labstream.conf(5).
        """

    static let server = """
        Usage:
          labstream server add jellyfin|emby NAME --url URL --user USER --password-stdin
          labstream server add jellyfin|emby NAME --url URL [--user USER] --token-stdin
          labstream server add plex NAME --pin [--server NAME] [--url URL] [--plex-tv-url URL]
          labstream server add plex NAME --token-stdin [--server NAME] [--url URL] [--plex-tv-url URL]
          labstream server add silo NAME --url URL [--device | --user USER --password-stdin | --token-stdin] [--profile NAME [--pin-stdin]]
          labstream server list [--json]
          labstream server remove NAME [--delete-files]

        Jellyfin and Emby: add logs in with the password read from standard input (it is never stored)
        and keeps only the access token, in the 0600 credentials file. --token-stdin adopts an existing
        token or API key (an API key, and any Emby token, needs --user to pick whose libraries to
        mount). An Emby URL may be given with or without its /emby base path.

        Plex: --pin prints a code to enter at https://plex.tv/link and waits until it is approved or
        expires. --token-stdin reads a plex.tv account token instead, or, with --url, a token for that
        server itself (plex.tv is then not asked). The server is found among the account's resources
        (--server NAME when there are several) and reached through the first connection that answers:
        local before remote, https when the server requires it, relay last. Only the server's own
        access token is stored. --plex-tv-url points at another plex.tv (tests).

        Silo (its native /api/v2; URL is the server's base URL): --device, the default, prints a code
        to enter at the server's /activate page where you are signed in and waits until it is approved
        (denied: exit 77; expired or cancelled: exit 75). --user USER --password-stdin logs in once
        (never retried); --token-stdin takes an API key (sa_...). --profile NAME picks the household
        profile (default: the primary one); a PIN-locked one takes its PIN with --pin-stdin (the last
        line of standard input, after the password or key): only the profile token it gives is stored.
        Only the refresh token (or the key) is stored; it is rotated in place when the server rotates it.
        A pin on Silo is a managed download of this machine: registered with the server, fetched
        through the entry, checked against its manifest's hash, reported completed; unpin deletes
        the entry. pin --quality asks for a preset the server offers (no remux); one download per film
        or episode per device, so the original and a copy of one item are not pinned together. server
        remove ends the Silo session on the server too.

        server remove NAME --delete-files also deletes the server's stored copies and partial files
        (while mounted, through the daemon). Without it they stay, listed by title in
        `labstream orphans`, where `labstream orphans --purge [PATH…]` frees them while mounted.

        list also names each server's libraries left out of the tree, and why (live TV, playlists,
        collections, Silo's audiobooks and podcasts, kinds Labstream cannot place). Adding an existing NAME replaces it.
        While mounted, list shows each server's event channel (Jellyfin/Emby WebSocket, Plex event
        source: what the server tells is synced at once; "events lost (why), trying again in N s"
        while it is down; Silo has none) and when the periodic refresh, the fallback, runs next.

        A URL that answers as another product is refused, naming it (an Emby server is not taken as
        Jellyfin). Each sign-in records the server's id (Jellyfin/Emby Id, Plex machineIdentifier; Silo
        gives none) and the user or profile; adding an existing NAME says when either differs. Under
        another user or profile the catalog is read again as the new one, a stored copy stays only
        where the new one sees the same item, every other is deleted at once (the answer counts them
        and the bytes freed), the old one's monitors, download entries and cleanup intents are dropped,
        and on Silo its entries are deleted on the server and its session signed out. Under another
        server nothing stored under the name stays.
        """

    static let mount = """
        Usage: labstream mount MOUNTPOINT [--foreground] [-o OPTIONS]

        Mounts every configured server under MOUNTPOINT, read-only. Without --foreground it returns once
        the mount answers (exit 0), saying which servers it left out (no stored credentials), or with
        the reason it could not mount. SIGTERM or
        `labstream unmount MOUNTPOINT` unmounts cleanly.

        Options (-o, comma-separated): allow_other, default_permissions, uid=N, gid=N, umask=OCTAL,
        offline_view=all|local, config=DIR, data=DIR, segment_size=SIZE, cache_max=SIZE (labstream.conf's
        max_size), rate_limit=SIZE, ro (the kernel mount itself read-only: a second walk of a large
        tree is served by the kernel alone, but setfattr answers EROFS and only `labstream pin` as
        the daemon's user pins).
        Accepted and ignored: defaults, _netdev, nofail, noauto, auto, user, users, x-systemd.*.
        rw is refused: the mount is read-only.

        Reading follows these options. Changing what the mount holds (pin, unpin, the queue
        commands, monitors, sync, and their setfattr forms) is for the daemon's user, root and the
        members of labstream.conf's [access] control_group; anyone else gets EACCES (exit 77).

        With [http] in labstream.conf the daemon also serves its status page and JSON API
        (labstream-http(7)); an address it cannot listen on stops the mount with the reason.
        """

    static let status = """
        Usage: labstream status [PATH…] [--json] [--watch]

        For each PATH inside a live mount (a file, or every file below a folder): its state, bytes
        present / total, and the reason when there is one; a file's copies at other qualities and a
        new version still arriving are shown with it, each with its own state. Without PATH: every
        file with local bytes, from the index. With no daemon running, PATH may be a catalog path
        (SERVER/LIBRARY/…), status says the daemon is not running, and what was under way shows as
        queued (reason daemon_not_running). A monitored series' folder first says its monitor, as
        monitor list does. Text shows sizes as 3.4 GiB and reasons as sentences; --json prints one
        array of objects (path, state, bytes_present, bytes_total, pinned, reason as a code, message,
        copies, new_version; a monitored series' folder adds one object with path and monitor; see
        labstream(1)). --watch follows files with local bytes (the whole
        mount without PATH) with a progress bar, smoothed rate and ETA per file, redrawn in place on a
        terminal, a line per change when piped, one JSON object per line with --json (plus rate and
        eta); it runs until interrupted.
        """

    static let sync = """
        Usage: labstream sync [NAME] [--full]

        Refreshes the catalog of every server (or NAME) now. A failed sync keeps the previous catalog.
        Jellyfin and Emby are asked only for what changed since the last sync, Silo for the films and
        episodes added since, each with every library's count to notice removals (any doubt reads
        everything); --full reads everything.
        With a daemon running, the daemon syncs (over its control socket; a sync of that server
        already under way is waited for first) and its tree shows the new catalog when the command
        returns. Progress (library, series n/m) is redrawn
        on a terminal and printed a line per step when piped; the last line is "NAME: N files".
        """

    static let monitor = """
        Usage:
          labstream monitor add SERIES-FOLDER --mode MODE [--delete-watched] [--max-storage SIZE]
          labstream monitor set SERIES-FOLDER [--mode MODE] [--delete-watched|--keep-watched] [--max-storage SIZE|--no-max-storage]
          labstream monitor remove SERIES-FOLDER | SERVER/SERIES-ID
          labstream monitor list [--json]

        Keeps a series downloaded as the server gains episodes, on every kind of server. At every
        catalog refresh (and at mount, and when a monitor is made or changed) each monitor of a
        server that answers is evaluated: episodes in its scope are pinned, one batch per refresh.
        MODE: all (every episode), future (only episodes added after the monitor was made),
        latest-season (the newest season; when a new one appears the old one's episodes are
        unpinned, their bytes kept until eviction needs them), seasons=2,3.
        --delete-watched: an episode the server marks watched is unpinned and its copy removed,
        unless you pinned it yourself or it is open. --max-storage SIZE (2G, 500M): a hard cap on what
        the monitor keeps; pinning in episode order stops at the cap (the rest are held back by it),
        watched episodes go first when it needs room, and an open or
        hand-pinned file is never removed. Pinning an episode yourself makes it yours; unpinning a
        monitored episode tells the monitor to leave it alone. Offline, monitors wait: nothing is
        pinned, unpinned or removed because a server is unreachable. remove stops the monitor and
        never unpins or deletes. A monitor whose series left the catalog (a rebuilt library it
        could not follow) has no folder: list shows it as SERVER/SERIES-ID (not in the catalog),
        and remove takes that name (through the running daemon). The same through attributes:
        setfattr -n user.labstream.monitor -v 'latest-season,delete-watched,max-storage=2G' SERIES-FOLDER
        (-v off removes it); getfattr shows user.labstream.monitor and user.labstream.monitor_holds.
        list (and status SERIES-FOLDER) says what each monitor holds, what it skipped and why, with
        counts (watched, held back by the cap, unpinned by you, waiting for an offline server,
        nothing in its scope yet), and when it looks next (as soon as the server tells of a change on
        its event channel, and at the latest at the daemon's next catalog refresh, else refresh_interval
        after the server's last sync); it reads the index, so it answers with no daemon running too
        (as of the last evaluation). A watched query whose episodes' own watched state says
        otherwise is named in the log, and those episodes are kept as unwatched.
        Needs a live mount, except list.
        """

    static let pin = """
        Usage:
          labstream pin PATH… [--quality Q] [--priority P] [--wait] [--json]
          labstream unpin PATH…

        Pins a file, season, series or library folder inside a live mount: its files download
        completely in the background and are never evicted. A folder is pinned in one transaction.
        --wait follows the download until every file (or copy) is present with its subtitles and
        artwork, or they were tried (exit 0; one that failed is named on stderr), or one fails (exit 74),
        or until the rest are paused for something only you can clear (a full disk, the storage
        budget max_size (reason over_budget, with the room it needs), `pause`): it
        then says what to do and exits 75. A file waiting for its server is followed on. Ctrl-C
        stops waiting (exit 130); the download goes on in the background. What holds the wait
        is said (server unavailable and the next try, full disk, waiting for the playback check).
        On a terminal a bar with smoothed rate, ETA and reason per file, redrawn in place; piped, a
        line per change; --json, one JSON object per line (bytes, files, done, failed, rate, eta,
        waiting: path/state/reason/message). With no daemon, --wait pins in the index and exits 69
        (nothing downloads until a mount). unpin stops background filling and
        keeps the bytes already present. A generated .nfo, or stored artwork or subtitles, is always
        local: pinning it says so (exit 65). The same works with: setfattr -n user.labstream.pin -v 1 PATH
        When a pinned file finishes or fails for good, labstream.conf's on_complete or on_failed
        command runs (no shell) with LABSTREAM_PATH, _SERVER, _TITLE, _STATE and _REASON set.
        Only the daemon's user, root and labstream.conf's [access] control_group may pin, unpin or
        act on downloads; anyone else is refused (exit 77, saying whom to ask).

        A pin joins the end of the download queue (see `labstream queue --help`); --priority
        high|normal|low (default normal) gives it that priority, and a file already pinned keeps
        its place and takes the new priority.

        --quality original|remux|20mbps|10mbps|5mbps|2mbps|1mbps (default: the server's `quality`)
        keeps a server-made copy at that bitrate when the original exceeds it, or (remux) the
        original's streams in Matroska when it is in another container: a Jellyfin or Emby live
        stream (restarted from the beginning if interrupted), an Emby Convert job for a capped copy
        (preparing, then fetched in ranges), a Plex download-queue item (queued, then fetched in
        ranges) or a Silo download entry at a preset it offers (preparing, then fetched in ranges;
        Silo has no remux). It appears beside the original as "Title (Year) - 10mbps.mkv" once complete (named
        by what its bytes are: Plex's copies are MP4, ".mp4"); an original already within Q is kept as
        itself, and --wait says no copy was needed. user.labstream.copies on the original shows its state.

        These commands reach the daemon through DATA_DIR/control.sock (0600). With no daemon running,
        pin and unpin take catalog paths (SERVER/LIBRARY/…, as `labstream status` prints them) and
        change the index directly; the downloads start at the next mount.
        """

    static let queue = """
        Usage:
          labstream pause|resume|retry|cancel|verify PATH…
          labstream pause-all | resume-all

        Acts on the downloads of a file, or of every file below a folder, inside a live mount.
        pause stops planning new segments (those in flight finish); resume and retry queue the files
        again (a file parked for a full disk is tried once anyway, one over its storage budget is
        checked against it again; if it parks again the command says why and exits 75, also through
        the mount's attribute when another data dir's daemon serves the mount; both pauses
        also lift by themselves once there is room, checked with backoff and at once after a cancel or
        unpin); pause, resume and retry act on a file's copies at other qualities (name the
        original: a copy has no path until it is whole; pausing a live copy drops its stream) and
        on its new version still arriving beside its old copy too; cancel unpins and frees every local byte, first, so it works on a full
        disk too (unpin too: either may use the index's 1 MiB reserve); verify runs the completion check (size, libmpv playback probe)
        again on complete files and checks their stored side assets (subtitles, artwork), dropping a
        damaged one and fetching each anew without touching the media; retry of a file that failed
        the check (or whose new version did) keeps a copy in DATA_DIR/inspect and downloads it again.
        pause-all and resume-all act on the whole mount of this data dir.
        The same works with: setfattr -n user.labstream.action -v pause PATH
        """

    static let downloadQueue = """
        Usage:
          labstream queue [--json]
          labstream queue move PATH --first | --before OTHER
          labstream priority PATH… high|normal|low

        Pinned files download in queue order, at most max_concurrent_files at once: by default in
        the order they were pinned; every high-priority file before every normal one, low after them
        all; a file a player has open goes first, from the moment it is opened (its reads never
        wait for a slot in any case). A file pushed back by files ahead of it finishes the segments
        it has on the wire and shows queued (reason yielding) until its turn. A
        file waiting out a retry's backoff holds no slot: the next file fills meanwhile, and the
        waiting one is back in front when its backoff ends. Files whose bytes are all present get
        their playback check in the same order, one per processor the daemon may use, at most 4 at
        once.
        queue lists the pinned files still to fetch, in order: position, priority, state, bytes,
        rate and ETA (while downloading), and why one waits; --json prints a list of objects with
        path (a path the other commands take), position, priority, state, reading, bytes_present,
        bytes_total, rate (bytes/s), eta (s), reason and message (rate and eta when known, quality
        for a copy at another quality).
        priority gives every pinned file at or below each PATH that priority (exit 64 when none is
        pinned). queue move puts the pinned files at or below PATH first in the queue, or just
        before the first queued file at or below OTHER, keeping their own order; they take the
        priority of the place they move to, so they are listed exactly there. Reordering never
        interrupts the segments on the wire: a file moved back finishes those, then waits.
        These need a live mount of this data dir (its control socket); the order is kept in the
        index across restarts.
        """

    static let mountHelper = """
        Usage: mount.labstream SOURCE MOUNTPOINT [-o OPTIONS] [-f] [-n] [-s] [-v]

        The mount(8) helper: `mount -t labstream labstream /media/lib -o allow_other` or an fstab line
        `labstream /media/lib labstream _netdev,nofail,allow_other 0 0`. SOURCE is `labstream` (the
        default config dir) or the absolute path of a config dir. Options: allow_other,
        default_permissions, uid=, gid=, umask=, config=DIR, data=DIR, offline_view=all|local,
        cache_max=SIZE, segment_size=SIZE, rate_limit=SIZE, ro (no setfattr: pins only through
        `labstream pin`); ignored: defaults, _netdev, nofail, noauto, auto, user,
        users, x-systemd.*; rw is refused (except the leading rw mount(8) adds by default). -f stays in the foreground, -s ignores unknown options, -n
        is accepted, -v logs more. It returns once the mount answers. See mount.labstream(8).
        """

    static let unmount = """
        Usage: labstream unmount MOUNTPOINT

        Unmounts a Labstream mount and waits for its daemon to finish. The mount leaves the tree at
        once (a lazy unmount); files still open in it are served until they are closed, and the
        command says which processes hold them and waits for that (Ctrl-C stops waiting; the daemon
        still finishes by itself once they are closed).
        """

    static let repair = """
        Usage:
          labstream repair
          labstream orphans [--purge [PATH…]]

        repair: when the index (DATA_DIR/index.sqlite) is damaged or missing, moves it aside as
        index.sqlite.damaged-STAMP (never deleted) and puts its last verified backup
        (DATA_DIR/index.backup.sqlite, written after syncs at most every ten minutes, and at
        unmount) in its place; stored files the restored index owns, and copies that describe
        themselves (their .part.meta sidecar), are taken back from DATA_DIR/orphans; two taken back
        that are one file (a copy shared by two servers) are recorded as shared again, counted once.
        A mount with no index and a backup does the same by itself. Run it with no daemon on the
        data dir (else exit 75).

        Stored files no index row owns are never deleted: they are set aside in DATA_DIR/orphans.
        orphans lists them with their sizes, and the stored copies of removed servers by the path
        each had in the mount (SERVER/LIBRARY/…, what status prints for them; status, unpin and
        cancel take it too). --purge deletes them all, or those each PATH names (a listed path, or a
        folder above it); mounted or not. A PATH that names nothing deletes nothing (exit 66).
        """

    static let demo = """
        Usage: labstream demo [MOUNTPOINT]

        Starts an embedded Jellyfin-compatible server on loopback with generated media (ffmpeg: films,
        a show, and a music library of tones), adds it
        as server "demo" in a separate demo profile under the data dir, and mounts it in the foreground
        at MOUNTPOINT (default mountpoints/demo). Ctrl-C unmounts and stops it.
        """
}

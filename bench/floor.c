/* The FUSE floor for `make bench`: the least any FUSE daemon can do for B5, B1 and B9, with the
 * kernel settings Labstream asks for (read-only, readdirplus for every chunk, directories opened
 * by the kernel, max_background 64, the multi-threaded loop with 8 idle workers).
 *
 *   floor tree N MOUNTPOINT   N folders mI, each holding one empty file mI.mkv (B5's shape)
 *   floor files DIR MOUNTPOINT  DIR's regular files, mapped into memory; a read is one reply
 *                               straight from the file's pages (no pread: its copy is one a
 *                               cache replying from its receive buffer would not make)
 *
 * Everything is answered from memory: no catalog, no index, no network, no copy of its own.
 * Runs in the foreground until unmounted. A measuring tool, not part of Labstream.
 */
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static long folders;          /* tree: inode 1 root, 2..folders+1 folders, then their files */
static int nfiles;            /* files */
static char **names;
static char **maps;
static off_t *sizes;
static const double forever = 600;

static int is_tree(void) { return names == NULL; }

static int attributes(fuse_ino_t ino, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_nlink = 1;
    if (ino == 1) { st->st_mode = S_IFDIR | 0555; st->st_nlink = 2; return 0; }
    if (is_tree()) {
        if (ino >= 2 && ino < 2 + (fuse_ino_t)folders) { st->st_mode = S_IFDIR | 0555; st->st_nlink = 2; return 0; }
        if (ino >= 2 + (fuse_ino_t)folders && ino < 2 + 2 * (fuse_ino_t)folders) { st->st_mode = S_IFREG | 0444; return 0; }
        return -1;
    }
    if (ino >= 2 && ino < 2 + (fuse_ino_t)nfiles) { st->st_mode = S_IFREG | 0444; st->st_size = sizes[ino - 2]; return 0; }
    return -1;
}

static void entry_for(fuse_ino_t ino, struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    e->ino = ino;
    e->generation = 1;
    e->attr_timeout = forever;
    e->entry_timeout = forever;
    attributes(ino, &e->attr);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    conn->max_background = 64;
    conn->congestion_threshold = 48;
    conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
}

/* The name's inode under parent, or 0. */
static fuse_ino_t child(fuse_ino_t parent, const char *name)
{
    char *end;
    if (is_tree()) {
        if (name[0] != 'm') return 0;
        long i = strtol(name + 1, &end, 10);
        if (i < 1 || i > folders) return 0;
        if (parent == 1 && *end == '\0') return 1 + i;
        if (parent == 1 + (fuse_ino_t)i && strcmp(end, ".mkv") == 0) return 1 + folders + i;
        return 0;
    }
    if (parent != 1) return 0;
    for (int i = 0; i < nfiles; i++) if (strcmp(names[i], name) == 0) return 2 + i;
    return 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fuse_entry_param e;
    fuse_ino_t ino = child(parent, name);
    if (!ino) { memset(&e, 0, sizeof e); e.entry_timeout = forever; fuse_reply_entry(req, &e); return; }
    entry_for(ino, &e);
    fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct stat st;
    if (attributes(ino, &st) != 0) { fuse_reply_err(req, ENOENT); return; }
    fuse_reply_attr(req, &st, forever);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino; (void)fi;
    fuse_reply_err(req, ENOSYS);   /* the kernel opens directories itself, as with Labstream */
}

/* Entry i (from 0) of directory ino: its name into buf, its inode, or 0 past the end. */
static fuse_ino_t listing(fuse_ino_t ino, long i, char *buf, size_t room)
{
    if (i == 0) { snprintf(buf, room, "."); return ino; }
    if (i == 1) { snprintf(buf, room, ".."); return 1; }
    i -= 2;
    if (ino == 1) {
        if (is_tree()) { if (i >= folders) return 0; snprintf(buf, room, "m%ld", i + 1); return 2 + i; }
        if (i >= nfiles) return 0;
        snprintf(buf, room, "%s", names[i]);
        return 2 + i;
    }
    if (is_tree() && i == 0) { snprintf(buf, room, "m%ld.mkv", (long)ino - 1); return ino + folders; }
    return 0;
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)fi;
    char *buf = malloc(size), name[512];
    size_t used = 0;
    for (long i = off;; i++) {
        fuse_ino_t target = listing(ino, i, name, sizeof name);
        if (!target) break;
        struct fuse_entry_param e;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) {
            memset(&e, 0, sizeof e);
            e.attr.st_ino = target;
            e.attr.st_mode = S_IFDIR;
        } else {
            entry_for(target, &e);
        }
        size_t need = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, i + 1);
        if (need > size - used) break;
        used += need;
    }
    fuse_reply_buf(req, buf, used);
    free(buf);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    if ((fi->flags & O_ACCMODE) != O_RDONLY) { fuse_reply_err(req, EROFS); return; }
    fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)fi;
    if (is_tree() || ino < 2 || ino >= 2 + (fuse_ino_t)nfiles) { fuse_reply_buf(req, NULL, 0); return; }
    off_t length = sizes[ino - 2];
    size_t n = off >= length ? 0 : (size_t)(length - off) < size ? (size_t)(length - off) : size;
    fuse_reply_buf(req, n ? maps[ino - 2] + off : NULL, n);
}

static int load_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) { perror(dir); return -1; }
    struct dirent *de;
    while ((de = readdir(d))) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (de->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        names = realloc(names, (nfiles + 1) * sizeof *names);
        maps = realloc(maps, (nfiles + 1) * sizeof *maps);
        sizes = realloc(sizes, (nfiles + 1) * sizeof *sizes);
        names[nfiles] = strdup(de->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) { perror(path); return -1; }
        sizes[nfiles] = st.st_size;
        maps[nfiles] = st.st_size ? mmap(NULL, st.st_size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0) : NULL;
        if (maps[nfiles] == MAP_FAILED) { perror(path); return -1; }
        close(fd);
        nfiles++;
    }
    closedir(d);
    if (!names) names = calloc(1, sizeof *names);   /* an empty DIR is still the files mode */
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "tree") != 0 && strcmp(argv[1], "files") != 0)) {
        fprintf(stderr, "usage: floor tree N MOUNTPOINT | floor files DIR MOUNTPOINT\n");
        return 2;
    }
    if (strcmp(argv[1], "tree") == 0) {
        folders = strtol(argv[2], NULL, 10);
        if (folders < 1) { fprintf(stderr, "floor: N must be a positive number\n"); return 2; }
    } else if (load_files(argv[2]) != 0) {
        return 1;
    }
    static const struct fuse_lowlevel_ops ops = {
        .init = op_init, .lookup = op_lookup, .getattr = op_getattr, .opendir = op_opendir,
        .readdirplus = op_readdirplus, .open = op_open, .read = op_read,
    };
    char *fargv[] = { "floor", "-o", "fsname=floor,subtype=floor", NULL };
    struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
    struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
    if (!se || fuse_session_mount(se, argv[3]) != 0) { fprintf(stderr, "floor: cannot mount at %s\n", argv[3]); return 1; }
    struct fuse_loop_config *config = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(config, 64);
    fuse_loop_cfg_set_idle_threads(config, 8);
    int rc = fuse_session_loop_mt(se, config);
    fuse_loop_cfg_destroy(config);
    fuse_session_unmount(se);
    fuse_session_destroy(se);
    return rc ? 1 : 0;
}

/// Which stored copies of removed servers a person's paths name (`orphans --purge PATH`,
/// `cancel PATH`, `status PATH`). Such a copy has no place in the mount any more: it is named by
/// the path it had there (`SERVER/LIBRARY/…`, as `status` and `orphans` print it), or by its key
/// when it was removed before paths were kept. Pure.
public enum Reclaim {
    /// `typed` as the path `status` prints: without the mount point in front (when it has it),
    /// without doubled or trailing slashes.
    public static func clean(_ typed: String, mountpoint: String?) -> String {
        var path = typed
        if let mountpoint, !mountpoint.isEmpty, path == mountpoint || path.hasPrefix(mountpoint + "/") {
            path = String(path.dropFirst(mountpoint.count))
        }
        return path.split(separator: "/").joined(separator: "/")
    }

    /// The indices of `paths` (each copy's) that `asked` names, exactly or as a folder above
    /// it; every one when nothing is asked.
    public static func named(_ paths: [String], by asked: [String]) -> [Int] {
        guard !asked.isEmpty else { return Array(paths.indices) }
        let wanted = asked.map { $0.split(separator: "/").joined(separator: "/") }.filter { !$0.isEmpty }
        return paths.indices.filter { i in wanted.contains { paths[i] == $0 || paths[i].hasPrefix($0 + "/") } }
    }
}

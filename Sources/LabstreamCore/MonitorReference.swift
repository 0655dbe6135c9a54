/// A monitor named by its server and series id rather than by its series folder (issue 41): a
/// monitor whose series left the catalog (a rebuilt library it could not follow) has no folder
/// in the mount, so `monitor list` shows it as `SERVER/SERIES-ID` and `monitor remove` takes
/// that to remove it.
public enum MonitorReference {
    /// `SERVER/SERIES-ID`: what `monitor list` shows for a monitor with no folder.
    public static func name(of monitor: SeriesMonitor) -> String { monitor.server + "/" + monitor.seriesId }

    /// The monitor `text` names as `name(of:)` spells it (spaces around it and a trailing slash
    /// allowed, as a copied line or a shell's completion leaves them); nil when none.
    public static func named(_ text: String, among monitors: [SeriesMonitor]) -> SeriesMonitor? {
        var name = text.trimmingSpaces
        while name.hasSuffix("/") { name.removeLast() }
        return monitors.first { Self.name(of: $0) == name }
    }
}

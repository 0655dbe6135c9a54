import LabstreamCore
import Testing

/// A monitor named `SERVER/SERIES-ID`, as `monitor list` shows one whose series left the catalog.
@Suite struct MonitorReferenceTests {
    let monitors = [
        SeriesMonitor(server: "home", seriesId: "a1b2", mode: .future), SeriesMonitor(server: "plex", seriesId: "a1b2", mode: .all),
        SeriesMonitor(server: "home", seriesId: "a1", mode: .all)
    ]

    @Test func theNameMonitorListShowsNamesThatMonitorAndNoOther() {
        #expect(MonitorReference.name(of: monitors[0]) == "home/a1b2")
        #expect(MonitorReference.named("home/a1b2", among: monitors) == monitors[0])
        #expect(MonitorReference.named("plex/a1b2", among: monitors) == monitors[1])
        #expect(MonitorReference.named("home/a1", among: monitors) == monitors[2])
        // As a copied line or a shell's completion leaves it.
        #expect(MonitorReference.named(" home/a1b2/ ", among: monitors) == monitors[0])
    }

    @Test func aNameThatIsNotExactlyAMonitorsNamesNone() {
        for text in ["home/a1b", "a1b2", "home", "home/", "/home/a1b2", "other/a1b2", "home/A1B2", "home/a1b2 (not in the catalog)", ""] {
            #expect(MonitorReference.named(text, among: monitors) == nil, "\(text)")
        }
        #expect(MonitorReference.named("home/a1b2", among: []) == nil)
    }
}

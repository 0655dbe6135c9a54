import LabstreamCore
import Testing

@Suite struct ReclaimTests {
    let paths = [
        "den/Movies/Heat (1995)/Heat (1995).mkv", "den/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv", "den/31000/src1", "denver/Movies/X/X.mkv"
    ]

    @Test func aPathNamesItsCopyOrEveryCopyBelowIt() {
        #expect(Reclaim.named(paths, by: ["den/Movies/Heat (1995)/Heat (1995).mkv"]) == [0])
        #expect(Reclaim.named(paths, by: ["den/Shows/"]) == [1])
        // A server's folder is a folder: not another server whose name starts the same.
        #expect(Reclaim.named(paths, by: ["den"]) == [0, 1, 2])
        // A copy removed before paths were kept is named by its key, as status printed it.
        #expect(Reclaim.named(paths, by: ["den/31000/src1"]) == [2])
        #expect(Reclaim.named(paths, by: ["den/Movies/Heat"]).isEmpty)
        #expect(Reclaim.named(paths, by: []) == [0, 1, 2, 3])
    }

    @Test func theMountPointInFrontIsNotPartOfThePath() {
        #expect(Reclaim.clean("/srv/media/den/Movies//Heat/", mountpoint: "/srv/media") == "den/Movies/Heat")
        #expect(Reclaim.clean("den/Movies/Heat", mountpoint: "/srv/media") == "den/Movies/Heat")
        #expect(Reclaim.clean("/srv/mediaX/den", mountpoint: "/srv/media") == "srv/mediaX/den")
        #expect(Reclaim.clean("/srv/media/den", mountpoint: nil) == "srv/media/den")
    }
}

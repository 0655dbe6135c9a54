import Foundation
import Testing

@testable import LabstreamFixture

/// The fixture writes its answers itself (Foundation's writer was most of its CPU at 100 000
/// items): what it writes must read back as the same value through Foundation's reader.
@Suite struct FixtureJSONTests {
    @Test func writesWhatFoundationReadsBackTheSame() throws {
        let missing: String? = nil
        let present: Int? = 7
        let value: [String: Any] = [
            "Items": [
                ["Name": "Amélie \"Le fabuleux\" \\ destin\n\t\u{01}", "Id": "0f2a", "RunTimeTicks": Int64(72_000_000_000), "Year": 2001],
                ["Name": "日本語 / ok", "IsFolder": false, "CommunityRating": 7.5, "Played": true, "Index": Int32(-3)]
            ],
            "TotalRecordCount": 2, "Whole": 3.0, "Empty": [String](), "Nothing": NSNull(), "Unset": missing as Any, "Set": present as Any,
            "Tags": ["a", "b"]
        ]
        let bytes = try #require(FixtureJSON.encode(value))
        let back = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? NSDictionary)
        var expected = value
        expected["Unset"] = NSNull()
        expected["Set"] = 7
        #expect(back == (expected as NSDictionary))
        #expect(String(decoding: bytes, as: UTF8.self).contains("\"Whole\":3"))
    }

    @Test func aValueItCannotWriteIsLeftToFoundation() {
        #expect(FixtureJSON.encode(["When": Date()]) == nil)
        #expect(FixtureJSON.encode(["Ratio": Double.nan]) == nil)
    }
}

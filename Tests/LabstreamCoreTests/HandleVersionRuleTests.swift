import LabstreamCore
import Testing

@Suite struct HandleVersionRuleTests {
    func admit(_ handle: inout HandleVersion, _ expected: Bool, _ served: ServedVersion) -> Bool { handle.admit(served) == expected }

    let v1 = ServedVersion(attempt: AttemptID(1), validator: .etag("\"a\""))

    @Test func aHandleKeepsTheVersionOfItsFirstRead() {
        var handle = HandleVersion()
        #expect(admit(&handle, true, v1))
        #expect(admit(&handle, true, v1))
        // A new attempt after the server ignored Range, same validator: the same version.
        #expect(admit(&handle, true, ServedVersion(attempt: AttemptID(2), validator: .etag("\"a\""))))
        // The file changed on the server: never through this handle.
        #expect(admit(&handle, false, ServedVersion(attempt: AttemptID(3), validator: .etag("\"b\""))))
        #expect(admit(&handle, false, ServedVersion(attempt: AttemptID(3), validator: .lastModified("Tue, 01 Dec 2026 10:00:00 GMT"))))
        #expect(handle.pinned == v1)
    }

    @Test func withoutValidatorsOnlyTheSameAttemptIsTheSameVersion() {
        var handle = HandleVersion()
        #expect(admit(&handle, true, ServedVersion(attempt: AttemptID(4), validator: nil)))
        #expect(admit(&handle, true, ServedVersion(attempt: AttemptID(4), validator: nil)))
        #expect(admit(&handle, false, ServedVersion(attempt: AttemptID(5), validator: nil)))
        #expect(admit(&handle, false, ServedVersion(attempt: AttemptID(5), validator: .etag("\"a\""))))
    }
}

/// Parses the ISO-8601 timestamps media servers send (`2024-03-01T12:00:00.0000000Z`, with any
/// number of fraction digits and an optional `±hh:mm` offset) to seconds since the epoch.
public enum ISODate {
    public static func epochSeconds(_ text: String) -> Int64? {
        let u = Array(text.utf8)
        func num(_ from: Int, _ len: Int) -> Int? {
            guard from >= 0, from + len <= u.count else { return nil }
            var v = 0
            for b in u[from..<(from + len)] {
                guard b >= 48, b <= 57 else { return nil }
                v = v * 10 + Int(b - 48)
            }
            return v
        }
        func at(_ i: Int, _ c: Character) -> Bool { i < u.count && u[i] == c.asciiValue! }
        guard let y = num(0, 4), at(4, "-"), let mo = num(5, 2), at(7, "-"), let d = num(8, 2),
            (1...12).contains(mo), (1...31).contains(d)
        else { return nil }
        var seconds = 0
        if u.count > 10 {
            guard at(10, "T") || at(10, " "), let h = num(11, 2), at(13, ":"), let mi = num(14, 2) else { return nil }
            seconds = h * 3600 + mi * 60
            var i = 16
            if at(i, ":"), let s = num(i + 1, 2) { seconds += s; i += 3 }
            if at(i, ".") { i += 1; while i < u.count, u[i] >= 48, u[i] <= 57 { i += 1 } }
            if at(i, "+") || at(i, "-") {
                let sign = at(i, "+") ? 1 : -1
                guard let oh = num(i + 1, 2) else { return nil }
                let om = at(i + 3, ":") ? (num(i + 4, 2) ?? 0) : (num(i + 3, 2) ?? 0)
                seconds -= sign * (oh * 3600 + om * 60)
            }
        }
        return Int64(daysFromCivil(y, mo, d)) * 86400 + Int64(seconds)
    }

    /// Howard Hinnant's days-from-civil.
    static func daysFromCivil(_ y0: Int, _ m: Int, _ d: Int) -> Int {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    /// `2026-12-01T03:04:05.000Z` for seconds since the epoch (UTC).
    public static func string(epochSeconds t: Int64) -> String { string(epochMilliseconds: t * 1000) }

    /// `2026-12-01T03:04:05.123Z` for milliseconds since the epoch (UTC).
    public static func string(epochMilliseconds ms: Int64) -> String {
        let t = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
        let millis = Int(ms - t * 1000)
        let days = Int(t >= 0 ? t / 86400 : (t - 86399) / 86400)
        let secs = Int(t - Int64(days) * 86400)
        // Howard Hinnant's civil-from-days.
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let fraction = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(y)-\(two(m))-\(two(d))T\(two(secs / 3600)):\(two(secs / 60 % 60)):\(two(secs % 60)).\(fraction)Z"
    }
}

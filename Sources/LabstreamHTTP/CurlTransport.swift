import CCurl
import Glibc
import LabstreamBackends
import LabstreamCore
import Synchronization

/// `HTTPTransport` on libcurl easy handles. Blocking: call it from a plain thread (a FUSE worker
/// or a transfer thread), never from Swift's cooperative pool.
public final class CurlTransport: HTTPTransport {
    public struct Options: Sendable {
        public var connectTimeout: Double
        /// A transfer making no progress for this long is aborted.
        public var stallTimeout: Double
        /// Whole buffered API calls give up after this long.
        public var requestTimeout: Double

        public init(connectTimeout: Double = 5, stallTimeout: Double = 30, requestTimeout: Double = 120) {
            self.connectTimeout = connectTimeout
            self.stallTimeout = stallTimeout
            self.requestTimeout = requestTimeout
        }
    }

    let options: Options
    /// Idle easy handles; reusing them keeps connections alive between requests.
    let idle = Mutex<[CurlHandle]>([])

    public init(options: Options = Options()) {
        Self.globalInit
        self.options = options
    }

    deinit {
        for h in idle.withLock({ $0 }) { curl_easy_cleanup(h.raw) }
    }

    static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    public func send(_ request: HTTPRequest) throws(TransportError) -> HTTPResponse {
        let state = TransferState(mode: .buffer(limit: request.bodyLimit))
        do throws(TransportError) {
            let status = try perform(request, state: state, wholeTimeout: options.requestTimeout)
            return HTTPResponse(status: status, headers: state.headers, body: state.body)
        } catch {
            // Cut at the body limit on purpose: the answer is what arrived.
            if state.truncated { return HTTPResponse(status: state.status, headers: state.headers, body: state.body) }
            throw error
        }
    }

    public func fetchRange(
        _ request: HTTPRequest, expectation: RangeExpectation,
        sink: (UnsafeRawBufferPointer, Int64, Validator?) throws -> Void
    ) throws(TransportError) -> RangeTransferResult {
        try withoutActuallyEscaping(sink) { sink throws(TransportError) -> RangeTransferResult in
            let state = TransferState(mode: .range(expectation, sink))
            let status: Int
            do throws(TransportError) {
                status = try perform(request, state: state, wholeTimeout: 0)
            } catch {
                // The beginning of a whole-file answer was all we asked for: stopping there is success.
                if case .acceptPrefix(let validator)? = state.verdict, state.written == expectation.range.count {
                    return RangeTransferResult(
                        verdict: .accept(validator: validator, total: expectation.total), bytesWritten: state.written, status: state.status)
                }
                // A transfer aborted because its headers failed the policy is not a transport
                // failure: report the verdict, with nothing written.
                if let verdict = state.verdict, !verdict.isAccept {
                    return RangeTransferResult(verdict: verdict, bytesWritten: 0, status: state.status, retryAfter: state.headers["retry-after"])
                }
                if let sinkError = state.sinkError { throw .aborted("writing the partial failed: \(sinkError)") }
                throw error
            }
            var verdict = state.verdict ?? judge(state, expectation: expectation, status: status)
            if case .acceptPrefix(let validator) = verdict { verdict = .accept(validator: validator, total: expectation.total) }
            return RangeTransferResult(verdict: verdict, bytesWritten: state.written, status: status, retryAfter: state.headers["retry-after"])
        }
    }

    public func fetchStream(_ request: HTTPRequest, sink: (UnsafeRawBufferPointer, Int64) throws -> Void) throws(TransportError) -> (
        status: Int, written: Int64
    ) {
        try withoutActuallyEscaping(sink) { sink throws(TransportError) -> (status: Int, written: Int64) in
            let state = TransferState(mode: .stream(sink))
            do throws(TransportError) {
                let status = try perform(request, state: state, wholeTimeout: 0)
                return (status, state.written)
            } catch {
                if state.refused { return (state.status, 0) }  // not a 200: nothing was written
                if let sinkError = state.sinkError { throw .aborted("writing the copy failed: \(sinkError)") }
                throw error
            }
        }
    }

    func judge(_ state: TransferState, expectation: RangeExpectation, status: Int) -> RangeResponsePolicy.Verdict {
        RangeResponsePolicy.judge(
            status: status, contentRange: state.headers["content-range"],
            etag: state.headers["etag"], lastModified: state.headers["last-modified"],
            contentEncoding: state.headers["content-encoding"], expected: expectation)
    }

    func perform(_ request: HTTPRequest, state: TransferState, wholeTimeout: Double) throws(TransportError) -> Int {
        let handle = idle.withLock { $0.popLast() }?.raw ?? curl_easy_init()!
        var reusable = true
        defer {
            if reusable {
                curl_easy_reset(handle)
                let spare = CurlHandle(raw: handle)
                let kept = idle.withLock { pool in
                    guard pool.count < 16 else { return false }
                    pool.append(spare)
                    return true
                }
                if !kept { curl_easy_cleanup(handle) }
            } else {
                curl_easy_cleanup(handle)
            }
        }
        var headerList: UnsafeMutablePointer<curl_slist>? = nil
        for h in request.headers { headerList = curl_slist_append(headerList, "\(h.name): \(h.value)") }
        headerList = curl_slist_append(headerList, "Expect:")
        defer { curl_slist_free_all(headerList) }

        let box = Unmanaged.passRetained(state)
        defer { box.release() }

        CCurl_setopt_string(handle, CURLOPT_URL, request.url)
        CCurl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        CCurl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0)
        CCurl_setopt_long(handle, CURLOPT_BUFFERSIZE, 512 * 1024)
        CCurl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout * 1000))
        // A stall is timed from the last byte either way (libcurl's low-speed check averages
        // over a moving window, and noticed a body that stopped seconds late).
        state.stallTimeout = options.stallTimeout
        state.lastProgress = monotonicNow()
        CCurl_setopt_long(handle, CURLOPT_NOPROGRESS, 0)
        CCurl_setopt_xferinfo(
            handle,
            { user, _, down, _, up in
                let state = Unmanaged<TransferState>.fromOpaque(user!).takeUnretainedValue()
                return state.progress(down: Int64(down), up: Int64(up)) ? 0 : 1
            })
        CCurl_setopt_pointer(handle, CURLOPT_XFERINFODATA, box.toOpaque())
        if wholeTimeout > 0 { CCurl_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(wholeTimeout * 1000)) }
        CCurl_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList)
        CCurl_setopt_string(handle, CURLOPT_USERAGENT, "Labstream/\(LabstreamVersion.current)")
        // Bytes must be the file's own bytes at their offsets: never a compressed encoding.
        CCurl_setopt_string(handle, CURLOPT_ACCEPT_ENCODING, "identity")
        // A body goes as POST fields whatever the method (a PATCH carries one too); any method
        // but GET and POST is named as it is.
        let sendsBody = request.method == "POST" || request.body != nil
        if sendsBody {
            CCurl_setopt_long(handle, CURLOPT_POST, 1)
            state.upload = request.body ?? []
        }
        if request.method != "GET" && request.method != "POST" {
            CCurl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, request.method)
        }
        CCurl_setopt_callback(
            handle, CURLOPT_HEADERFUNCTION,
            { ptr, size, count, user in
                let state = Unmanaged<TransferState>.fromOpaque(user!).takeUnretainedValue()
                state.headerLine(UnsafeRawBufferPointer(start: ptr, count: size * count))
                return size * count
            })
        CCurl_setopt_pointer(handle, CURLOPT_HEADERDATA, box.toOpaque())
        CCurl_setopt_callback(
            handle, CURLOPT_WRITEFUNCTION,
            { ptr, size, count, user in
                let state = Unmanaged<TransferState>.fromOpaque(user!).takeUnretainedValue()
                return state.body(UnsafeRawBufferPointer(start: ptr, count: size * count)) ? size * count : 0
            })
        CCurl_setopt_pointer(handle, CURLOPT_WRITEDATA, box.toOpaque())

        let code: CURLcode = state.upload.withUnsafeBufferPointer { body in
            if sendsBody {
                CCurl_setopt_pointer(handle, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: body.baseAddress))
                CCurl_setopt_long(handle, CURLOPT_POSTFIELDSIZE, body.count)
            }
            return curl_easy_perform(handle)
        }
        var status = 0
        CCurl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        state.status = status
        guard code == CURLE_OK else {
            reusable = false
            let message = String(cString: curl_easy_strerror(code))
            let where_ = request.redactedDescription
            switch code {
            case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_SSL_CONNECT_ERROR:
                throw .unreachable("\(where_): \(message)")
            case CURLE_ABORTED_BY_CALLBACK where state.stalled:
                throw .stalled("\(where_): " + stallMessage(status: state.status, bodyBytes: state.bodyBytes))
            case CURLE_OPERATION_TIMEDOUT:
                // libcurl says only "Timeout was reached": say which limit, and what to do.
                var elapsed: curl_off_t = 0
                CCurl_getinfo_offt(handle, CURLINFO_TOTAL_TIME_T, &elapsed)
                throw .timedOut("\(where_): " + timeoutMessage(elapsedSeconds: Double(elapsed) / 1e6, wholeTimeout: wholeTimeout))
            case CURLE_WRITE_ERROR:
                throw .aborted("\(where_): transfer stopped by Labstream")
            default:
                throw .protocolError("\(where_): \(message)")
            }
        }
        return status
    }
}

extension CurlTransport {
    /// Which of the transport's limits ran out, in words a user can act on. A stall is not one
    /// of them (`stallMessage`): what is left is the whole request's limit, or the connection's.
    func timeoutMessage(elapsedSeconds: Double, wholeTimeout: Double) -> String {
        if wholeTimeout > 0 && elapsedSeconds >= wholeTimeout - 0.5 {
            return "no complete answer within \(Self.seconds(wholeTimeout)); the server is answering too slowly"
        }
        return "no connection within \(Self.seconds(options.connectTimeout)) (connect_timeout): "
            + "check that the server is running and reachable from this machine"
    }

    /// The server was reached and asked, then stopped sending: where in its answer, and what to do.
    func stallMessage(status: Int, bodyBytes: Int64) -> String {
        let quiet = "sent nothing for \(Self.seconds(options.stallTimeout)) (fetch_timeout)"
        let advice = "raise fetch_timeout in labstream.conf if it is often this slow"
        if bodyBytes > 0 {
            return "the server stopped sending mid-body: it \(quiet) after \(bodyBytes) bytes of its answer (HTTP \(status)); "
                + "it may be overloaded or its disk slow: " + advice
        }
        if status > 0 { return "the server answered (HTTP \(status)), then \(quiet) of its body; it may be busy: " + advice }
        return "the server \(quiet) after the request; it may be busy (transcoding, scanning): " + advice
    }

    static func seconds(_ s: Double) -> String { s == s.rounded() ? "\(Int(s)) s" : "\(s) s" }
}

/// Seconds on a clock that never jumps (stall timing).
func monotonicNow() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// An idle easy handle; only one thread uses a handle at a time (it is popped from the pool).
struct CurlHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer
}

/// Per-transfer state the C callbacks reach through their userdata pointer. Only the thread
/// running `curl_easy_perform` touches it.
final class TransferState {
    enum Mode {
        case buffer(limit: Int?)
        case range(RangeExpectation, (UnsafeRawBufferPointer, Int64, Validator?) throws -> Void)
        case stream((UnsafeRawBufferPointer, Int64) throws -> Void)
    }

    let mode: Mode
    var headers: [String: String] = [:]
    var body: [UInt8] = []
    var upload: [UInt8] = []
    var status = 0
    var verdict: RangeResponsePolicy.Verdict?
    var written: Int64 = 0
    var sinkError: (any Error)?
    /// A stream answered with something other than a 200 in the identity encoding.
    var refused = false
    /// A buffered body stopped at its limit.
    var truncated = false
    /// Body bytes received (whatever was done with them).
    var bodyBytes: Int64 = 0
    /// Stall timing: the limit, when bytes last moved (either way), what had moved then, and
    /// whether the transfer was ended for it.
    var stallTimeout: Double = 0
    var lastProgress: Double = 0
    var moved: (down: Int64, up: Int64) = (0, 0)
    var stalled = false

    init(mode: Mode) { self.mode = mode }

    /// libcurl's progress callback: false ends the transfer, nothing having moved for the
    /// stall timeout (headers count as movement).
    func progress(down: Int64, up: Int64) -> Bool {
        let now = monotonicNow()
        if down != moved.down || up != moved.up {
            moved = (down, up)
            lastProgress = now
            return true
        }
        guard stallTimeout > 0, now - lastProgress >= stallTimeout else { return true }
        stalled = true
        return false
    }

    func headerLine(_ raw: UnsafeRawBufferPointer) {
        lastProgress = monotonicNow()
        let line = String(decoding: raw, as: UTF8.self).trimming("\r\n")
        if line.hasPrefix("HTTP/") {
            headers = [:]  // a new response (after 100 Continue): forget the previous one
            let parts = line.split(separator: " ").map(String.init)
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = line[..<colon].lowercased()
        let value = String(line[line.index(after: colon)...]).trimming(" \t")
        headers[name] = value
    }

    /// Returns false to make curl abort the transfer.
    func body(_ chunk: UnsafeRawBufferPointer) -> Bool {
        bodyBytes += Int64(chunk.count)
        switch mode {
        case .buffer(let limit):
            if let limit, body.count + chunk.count > limit {
                body.append(contentsOf: chunk.prefix(limit - body.count))
                truncated = true
                return false
            }
            body.append(contentsOf: chunk)
            return true
        case .stream(let sink):
            if written == 0 && (status != 200 || (headers["content-encoding"].map { $0 != "identity" } ?? false)) {
                refused = true
                return false
            }
            do { try sink(chunk, written) } catch {
                sinkError = error
                return false
            }
            written += Int64(chunk.count)
            return true
        case .range(let expectation, let sink):
            if verdict == nil {
                verdict = RangeResponsePolicy.judge(
                    status: status, contentRange: headers["content-range"],
                    etag: headers["etag"], lastModified: headers["last-modified"],
                    contentEncoding: headers["content-encoding"], expected: expectation)
            }
            let validator: Validator?
            switch verdict {
            case .accept(let v, _)?: validator = v
            case .acceptPrefix(let v)?:
                // Only the range asked for; the rest of the file is not read.
                validator = v
                let wanted = Int(expectation.range.count - written)
                if chunk.count >= wanted {
                    do { try sink(UnsafeRawBufferPointer(rebasing: chunk[..<wanted]), expectation.range.lower + written, validator) } catch {
                        sinkError = error
                        return false
                    }
                    written += Int64(wanted)
                    return false  // stop: everything asked for is here
                }
            default: return false
            }
            guard written + Int64(chunk.count) <= expectation.range.count else {
                verdict = .reject("server sent more than the \(expectation.range.count) bytes asked for")
                return false
            }
            do {
                try sink(chunk, expectation.range.lower + written, validator)
            } catch {
                sinkError = error
                return false
            }
            written += Int64(chunk.count)
            return true
        }
    }
}

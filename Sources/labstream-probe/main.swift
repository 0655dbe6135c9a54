import Foundation
import LabstreamCore
import LabstreamProbe

// labstream-probe FILE [TIMEOUT [image]]: the libmpv playback probe in a process of its own, so that a
// file that crashes a decoder cannot take the daemon (and the mount) down with it, and the
// daemon does not carry libmpv and its many libraries. Prints what it saw as one JSON object.
let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: labstream-probe FILE [TIMEOUT-SECONDS [image]]\n".utf8))
    exit(64)
}
let timeout = arguments.count >= 3 ? Double(arguments[2]) ?? 10 : 10
let observation = MPVProbe.observe(path: arguments[1], timeout: timeout, image: arguments.count >= 4 && arguments[3] == "image")
let encoded = (try? JSONEncoder().encode(observation)) ?? Data("{}".utf8)
FileHandle.standardOutput.write(encoded + Data("\n".utf8))
exit(0)

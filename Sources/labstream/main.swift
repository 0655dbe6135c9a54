import Foundation
import LabstreamCLI

exit(Labstream.main(CommandLine.arguments))

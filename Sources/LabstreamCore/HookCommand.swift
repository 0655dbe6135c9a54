/// A completion hook's command line as labstream.conf writes it (`on_complete`, `on_failed`),
/// split into the argv it is run with: no shell, so nothing in it is expanded or interpreted.
/// Words are separated by spaces or tabs; a word in double quotes may hold spaces, and inside
/// quotes `\"` is a quote and `\\` a backslash. `|`, `;`, `$` and `*` are ordinary characters.
/// The first word is the program, an absolute path. Pure.
public enum HookCommand {
    public static func split(_ text: String) -> Result<[String], Problem> {
        var words: [String] = []
        var word = ""
        var inWord = false, quoted = false, escaped = false
        for c in text {
            if quoted {
                if escaped {
                    guard c == "\"" || c == "\\" else { return .failure(.badEscape(c)) }
                    word.append(c)
                    escaped = false
                } else if c == "\\" {
                    escaped = true
                } else if c == "\"" {
                    quoted = false
                } else {
                    word.append(c)
                }
            } else if c == " " || c == "\t" {
                if inWord { words.append(word) }
                word = ""
                inWord = false
            } else if c == "\"" {
                quoted = true
                inWord = true
            } else {
                word.append(c)
                inWord = true
            }
        }
        if quoted { return .failure(.unclosedQuote) }
        if inWord { words.append(word) }
        guard let program = words.first else { return .failure(.empty) }
        guard program.hasPrefix("/") else { return .failure(.notAbsolute(program)) }
        return .success(words)
    }

    /// `argv` written back so that `split` reads it again.
    public static func joined(_ argv: [String]) -> String {
        argv.map { word in
            guard word.isEmpty || word.contains(where: { " \t\"\\".contains($0) }) else { return word }
            var out = "\""
            for c in word {
                if c == "\\" || c == "\"" { out.append("\\") }
                out.append(c)
            }
            return out + "\""
        }.joined(separator: " ")
    }

    public enum Problem: Error, Sendable, Equatable, CustomStringConvertible {
        case empty, unclosedQuote, badEscape(Character), notAbsolute(String)

        public var description: String {
            switch self {
            case .empty: return "is empty; give the program's absolute path and its arguments"
            case .unclosedQuote: return "has a double quote that is never closed"
            case .badEscape(let c): return "has \\\(c) inside quotes; only \\\" and \\\\ are escapes"
            case .notAbsolute(let p): return "must start with the program's absolute path (not '\(p)'); it is run without a shell or PATH search"
            }
        }
    }
}

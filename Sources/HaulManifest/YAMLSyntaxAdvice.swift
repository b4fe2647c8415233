/// libyaml's syntax errors in the words of someone editing a manifest: what is wrong and what to do, with the
/// parser's own message kept after it for whoever knows YAML.
///
/// libyaml describes its state ("did not find expected '-' indicator while parsing a block collection"); a user
/// needs the usual causes, which are few: indentation that does not line up, a tab, a value holding ": " that
/// needs quotes, a bracket or quote left open. A problem not listed here keeps libyaml's message alone.
enum YAMLSyntaxAdvice {
    /// `problem` and `context`: libyaml's; `lineIndentedWithTab`: the problem's line has a tab in its indentation.
    static func message(problem: String, context: String?, lineIndentedWithTab: Bool) -> String {
        guard let advice = advice(problem: problem, context: context ?? "", tab: lineIndentedWithTab) else {
            return problem + (context.map { " (\($0))" } ?? "")
        }
        return "\(advice) (YAML: \(problem)\(context.map { " \($0)" } ?? ""))"
    }

    /// For a syntax error on the line where a quoted value that opened on an earlier line closed: most likely its
    /// own closing quote is missing, and the quote meant to open a later value closed it instead.
    static func quoteRunningOn(to problemLocation: SourceLocation, problem: String, context: String?) -> String {
        "this quoted value runs on to line \(problemLocation.line), where the YAML goes wrong at column "
            + "\(problemLocation.column): if its closing quote is missing, add it (YAML: \(problem)\(context.map { " \($0)" } ?? ""))"
    }

    private static func advice(problem: String, context: String, tab: Bool) -> String? {
        if tab || problem.contains("tab character") {
            return "this line is indented with a tab; YAML indents with spaces only"
        }
        switch problem {
        case "did not find expected '-' indicator":
            return "this line does not line up with the list above it: each item starts with \"-\" at the same column, "
                + "and an item's keys line up under its first key"
        case "did not find expected key":
            return context.contains("flow")
                ? "a key is missing here inside { … }"
                : "this line does not line up with the keys above it, or text follows a complete value (a stray "
                    + "bracket or quote): line keys up under each other, and quote a value that has such characters"
        case "mapping values are not allowed in this context":
            return "a value holds \": \" (or a second key follows on the same line): put the value in quotes"
        case "block sequence entries are not allowed in this context":
            return
                "a \"- \" item cannot follow a key on its line: start the list on the next line, indented under the key"
        case "could not find expected ':'":
            return "a key is not followed by \":\" (or a value runs onto the next line without quotes)"
        case "did not find expected ',' or '}'":
            return "a { … } is not closed: add the \"}\", or a \",\" between its keys"
        case "did not find expected ',' or ']'":
            return "a [ … ] is not closed: add the \"]\", or a \",\" between its items"
        case "did not find expected node content":
            return "a value is missing here (a [ or { left open, or a stray \",\")"
        case "found unexpected end of stream":
            return context.contains("quoted scalar")
                ? "the quote that opens this value is never closed: add its closing quote"
                : "the file ends in the middle of a value"
        case "found unexpected document indicator" where context.contains("quoted scalar"):
            return "the quote that opens this value is never closed: add its closing quote"
        case "found character that cannot start any token":
            return "a value cannot start with this character (@ or `): put the value in quotes"
        case "found undefined tag handle", "found unknown escape character", "found unexpected ':'":
            return "a value holds characters YAML reads specially: put it in quotes"
        case "control characters are not allowed":
            return "the file holds a control character here; a manifest is plain text"
        case "invalid leading UTF-8 octet", "invalid trailing UTF-8 octet", "incomplete UTF-8 octet sequence",
            "invalid Unicode character":
            return "the file is not UTF-8 text here; save it as UTF-8"
        default:
            return nil
        }
    }
}

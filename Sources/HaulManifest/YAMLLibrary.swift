import CLibYAML

/// The libyaml this process runs with, for `haul --version`.
package enum YAMLLibrary {
    package static var description: String { "libyaml \(String(cString: yaml_get_version_string()))" }
}

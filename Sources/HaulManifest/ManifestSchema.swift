/// The manifest format as JSON Schema (draft 2020-12), for editors and CI; `schema/haul-manifest.schema.json` holds
/// the same text (a test keeps them identical). The key sets come from the enums the loader dispatches on, so the
/// schema cannot name a key the loader rejects or omit one it accepts without a test failing.
package enum ManifestSchema {
    /// Keys accepted at the top level of a manifest.
    package static let topLevelKeys: Set<String> = Set(TopLevelKey.names)
    /// Keys accepted under `defaults:`.
    package static let defaultsKeys: Set<String> = Set(DefaultsKey.names)
    /// Keys accepted in a `files:` entry.
    package static let fileKeys: Set<String> = Set(FileKey.names)
    /// Keys accepted in an entry's `extract:` mapping.
    package static let extractKeys: Set<String> = Set(ExtractKey.names)
    /// Keys accepted in a list under `lists:`.
    package static let listKeys: Set<String> = Set(ListKeyName.names)
    /// Keys accepted in a list's key written as a mapping.
    package static let listKeyEntryKeys: Set<String> = Set(ListKeyEntryKey.names)
    /// Keys accepted in an entry's `from:` written as a mapping.
    package static let listPinKeys: Set<String> = Set(ListPinKey.names)

    /// Byte-identical to `schema/haul-manifest.schema.json`.
    package static let json: String = ##"""
        {
          "$schema": "https://json-schema.org/draft/2020-12/schema",
          "$id": "https://haul.dev/schema/manifest-v1.json",
          "title": "haul manifest, version 1",
          "description": "The files haul keeps in sync: each entry names a source URL, a destination under root and, ideally, a pinned digest. haul's own loader is authoritative; this schema mirrors its rules for editors and CI.",
          "type": "object",
          "additionalProperties": false,
          "required": [
            "version",
            "files"
          ],
          "properties": {
            "$schema": {
              "description": "The schema an editor validates this manifest against (a URL or a path to haul-manifest.schema.json); haul ignores it.",
              "type": "string"
            },
            "version": {
              "description": "Manifest format version. This schema describes version 1.",
              "const": 1
            },
            "root": {
              "description": "Folder under which every destination lives: relative to the manifest's folder, or absolute; ${VAR} and ${VAR:-default} expand from the environment. Resolved lexically (no symlink resolution). --root overrides it. Default: the manifest's folder.",
              "type": "string",
              "minLength": 1,
              "pattern": "^[^\\u0000]*$"
            },
            "defaults": {
              "$ref": "#/$defs/defaults",
              "description": "Values applied to every entry that does not set them itself."
            },
            "prune": {
              "description": "When true, destinations that haul synced earlier from this manifest and that it no longer lists are deleted; never a file haul did not write, never one changed since haul wrote it, never outside root. Default: false.",
              "type": "boolean"
            },
            "netrc": {
              "description": "When true, each request carries the login and password that the user's .netrc ($NETRC, else ~/.netrc) lists for the request's own host (HTTP Basic): a mirror gets its own host's, a redirect to another origin gets none, and none is ever printed. An Authorization header the entry sets itself wins. Default: false (--netrc also turns it on).",
              "type": "boolean"
            },
            "files": {
              "description": "The files to keep in sync. May be empty.",
              "type": "array",
              "items": {
                "$ref": "#/$defs/file"
              }
            },
            "lists": {
              "description": "Signed checksum lists, by name (not empty, no \"/\"): an entry that says from: NAME takes its digest from that list, read at each sync and trusted only once its signature checks out against one of the list's keys. A list no entry names is a warning.",
              "type": "object",
              "propertyNames": {
                "minLength": 1,
                "pattern": "^[^/\\u0000-\\u001f\\u007f]*$"
              },
              "additionalProperties": {
                "$ref": "#/$defs/list"
              }
            }
          },
          "$defs": {
            "defaults": {
              "description": "Values applied to every entry that does not set them itself.",
              "type": "object",
              "additionalProperties": false,
              "properties": {
                "retries": {
                  "$ref": "#/$defs/retries",
                  "description": "Retries after the first attempt, per URL: an integer from 0 to 100. Default: 3."
                },
                "timeout": {
                  "$ref": "#/$defs/timeout",
                  "description": "Stall window such as 30s, 250ms, 5m, 1h or a number of seconds; at least 1ms. Default: 30s."
                },
                "retry_on": {
                  "$ref": "#/$defs/retry_on",
                  "description": "HTTP statuses retried with backoff besides 408, 429 and 5xx (but 501, 505), such as 404 or \"403,404,500-504\". Default: none."
                },
                "mode": {
                  "$ref": "#/$defs/mode",
                  "description": "Permission bits in octal such as \"0644\". Default: 0644."
                },
                "headers": {
                  "$ref": "#/$defs/headers",
                  "description": "HTTP request headers; an entry's headers override defaults of the same name (case-insensitive)."
                }
              }
            },
            "file": {
              "description": "One file to fetch, or with extract an archive to unpack into a folder. At most one of sha256, sha384, sha512, checksum and integrity; or from: a signed list that gives it; with none, the entry is unpinned (an archive may instead pin the tree it unpacks to).",
              "type": "object",
              "additionalProperties": false,
              "required": [
                "url",
                "dest"
              ],
              "properties": {
                "url": {
                  "$ref": "#/$defs/url",
                  "description": "Where the file is fetched from first. ${VAR} references are replaced from the environment."
                },
                "dest": {
                  "description": "Destination relative to root: not absolute, no \"..\" component, not inside .haul, at most 4095 bytes with names of at most 255 bytes (the loader counts UTF-8 bytes; this schema can only count characters). It names a file, written without a trailing \"/\"; with extract, it names the folder the archive becomes, and may end with \"/\". Two entries may not share a destination, nor may one be a folder of another or lie inside a folder an archive is unpacked into, also when they differ only in Unicode normalization.",
                  "type": "string",
                  "minLength": 1,
                  "maxLength": 4095,
                  "pattern": "^(?!/)(?!(?:.*/)?\\.\\.(?:/|$))(?!(?:\\.?/)*\\.haul(?:/|$))(?!.*\\$\\{)(?!.*[^/]{256})[^\\u0000]*$"
                },
                "sha256": {
                  "description": "Expected SHA-256 digest: 64 hex digits, either case.",
                  "type": "string",
                  "pattern": "^[0-9a-fA-F]{64}$"
                },
                "sha384": {
                  "description": "Expected SHA-384 digest: 96 hex digits, either case.",
                  "type": "string",
                  "pattern": "^[0-9a-fA-F]{96}$"
                },
                "sha512": {
                  "description": "Expected SHA-512 digest: 128 hex digits, either case.",
                  "type": "string",
                  "pattern": "^[0-9a-fA-F]{128}$"
                },
                "checksum": {
                  "description": "Expected digest as <algorithm>:<hex>. sha256, sha384, sha512; sha1 and md5 are accepted with a warning (weak).",
                  "type": "string",
                  "pattern": "^(?:sha256:[0-9a-fA-F]{64}|sha384:[0-9a-fA-F]{96}|sha512:[0-9a-fA-F]{128}|sha1:[0-9a-fA-F]{40}|md5:[0-9a-fA-F]{32})$"
                },
                "integrity": {
                  "description": "Expected digest in Subresource Integrity form: sha256-, sha384- or sha512- followed by the padded standard base64 of the digest, optionally with ?options; several such tokens may be separated by spaces, and then the content must match one of the tokens of the strongest algorithm listed.",
                  "type": "string",
                  "pattern": "^(?:sha256-[A-Za-z0-9+/]{43}=|sha384-[A-Za-z0-9+/]{64}|sha512-[A-Za-z0-9+/]{86}==)(?:\\?[!-~]*)?(?:[ \\t\\n]+(?:sha256-[A-Za-z0-9+/]{43}=|sha384-[A-Za-z0-9+/]{64}|sha512-[A-Za-z0-9+/]{86}==)(?:\\?[!-~]*)?)*$"
                },
                "size": {
                  "description": "Expected size in bytes; a download of another size fails.",
                  "type": "integer",
                  "minimum": 0,
                  "maximum": 1125899906842624
                },
                "mirrors": {
                  "description": "Alternative URLs tried in order after url fails. ${VAR} references are replaced from the environment. The entry's headers are not sent to mirrors; a mirror written as {url, headers} gets its own headers, and only it.",
                  "type": "array",
                  "items": {
                    "oneOf": [
                      {
                        "$ref": "#/$defs/url"
                      },
                      {
                        "type": "object",
                        "additionalProperties": false,
                        "required": [
                          "url"
                        ],
                        "properties": {
                          "url": {
                            "$ref": "#/$defs/url"
                          },
                          "headers": {
                            "$ref": "#/$defs/headers",
                            "description": "Sent to this mirror only (its origin), never to the url or another mirror."
                          },
                          "cert": {
                            "type": "string",
                            "minLength": 1,
                            "description": "A client certificate (PEM) for this mirror's server (mutual TLS), relative to the manifest's folder; presented to it alone."
                          },
                          "key": {
                            "type": "string",
                            "minLength": 1,
                            "description": "The private key (PEM) of this mirror's cert, when it is not in cert's file."
                          }
                        }
                      }
                    ]
                  }
                },
                "mode": {
                  "$ref": "#/$defs/mode",
                  "description": "Permission bits in octal such as \"0644\". Default: 0644. Not with extract: each member of an archive keeps its own executable bit."
                },
                "retries": {
                  "$ref": "#/$defs/retries",
                  "description": "Retries after the first attempt, per URL: an integer from 0 to 100. Default: 3."
                },
                "timeout": {
                  "$ref": "#/$defs/timeout",
                  "description": "Stall window such as 30s, 250ms, 5m, 1h or a number of seconds; at least 1ms. Default: 30s."
                },
                "retry_on": {
                  "$ref": "#/$defs/retry_on",
                  "description": "HTTP statuses retried with backoff besides 408, 429 and 5xx (but 501, 505), such as 404 or \"403,404,500-504\". Default: none."
                },
                "cert": {
                  "type": "string",
                  "minLength": 1,
                  "description": "A client certificate (PEM) for the origin of url, for a server that asks for one (mutual TLS); relative to the manifest's folder. Never presented to a mirror. Over --cert."
                },
                "key": {
                  "type": "string",
                  "minLength": 1,
                  "description": "The private key (PEM) of cert, when it is not in cert's file; relative to the manifest's folder."
                },
                "refresh": {
                  "$ref": "#/$defs/timeout",
                  "description": "For an unpinned entry: after its server confirmed the copy, make no request for this long, instead of the freshness the server grants (Cache-Control max-age, Expires). Same form as timeout, at most 24h. --refresh asks at once. Default: the server's."
                },
                "headers": {
                  "$ref": "#/$defs/headers",
                  "description": "HTTP request headers; an entry's headers override defaults of the same name (case-insensitive)."
                },
                "extract": {
                  "description": "true: the URL is an archive, and dest names a folder that becomes its contents, unpacked as it downloads and replaced atomically once verified. A mapping says the same with settings. false, or no extract: a plain file.",
                  "oneOf": [
                    {
                      "type": "boolean"
                    },
                    {
                      "$ref": "#/$defs/extract"
                    }
                  ]
                },
                "from": {
                  "description": "The entry's digest is the one the signed list of this name (lists:) gives for the file, read at each sync once the list's signature checks out; the file's name in the list is the last segment of url's path (before ? and #, percent-decoded), or the name a mapping gives. Not with sha256, sha384, sha512, checksum or integrity (the list gives the digest); with extract, the list pins the archive.",
                  "oneOf": [
                    {
                      "type": "string",
                      "minLength": 1
                    },
                    {
                      "type": "object",
                      "additionalProperties": false,
                      "required": [
                        "list"
                      ],
                      "properties": {
                        "list": {
                          "type": "string",
                          "minLength": 1,
                          "description": "The list's name under lists:."
                        },
                        "name": {
                          "type": "string",
                          "minLength": 1,
                          "description": "The file's name in the list, when it is not the last segment of url's path."
                        }
                      }
                    }
                  ]
                }
              },
              "not": {
                "anyOf": [
                  {
                    "required": [
                      "sha256",
                      "sha384"
                    ]
                  },
                  {
                    "required": [
                      "sha256",
                      "sha512"
                    ]
                  },
                  {
                    "required": [
                      "sha256",
                      "checksum"
                    ]
                  },
                  {
                    "required": [
                      "sha256",
                      "integrity"
                    ]
                  },
                  {
                    "required": [
                      "sha384",
                      "sha512"
                    ]
                  },
                  {
                    "required": [
                      "sha384",
                      "checksum"
                    ]
                  },
                  {
                    "required": [
                      "sha384",
                      "integrity"
                    ]
                  },
                  {
                    "required": [
                      "sha512",
                      "checksum"
                    ]
                  },
                  {
                    "required": [
                      "sha512",
                      "integrity"
                    ]
                  },
                  {
                    "required": [
                      "checksum",
                      "integrity"
                    ]
                  },
                  {
                    "required": [
                      "from",
                      "sha256"
                    ]
                  },
                  {
                    "required": [
                      "from",
                      "sha384"
                    ]
                  },
                  {
                    "required": [
                      "from",
                      "sha512"
                    ]
                  },
                  {
                    "required": [
                      "from",
                      "checksum"
                    ]
                  },
                  {
                    "required": [
                      "from",
                      "integrity"
                    ]
                  }
                ]
              },
              "if": {
                "required": [
                  "extract"
                ],
                "properties": {
                  "extract": {
                    "not": {
                      "const": false
                    }
                  }
                }
              },
              "then": {
                "not": {
                  "required": [
                    "mode"
                  ]
                }
              },
              "else": {
                "properties": {
                  "dest": {
                    "pattern": "[^/]$"
                  }
                }
              }
            },
            "extract": {
              "description": "How an archive is unpacked. Every key is optional.",
              "type": "object",
              "additionalProperties": false,
              "properties": {
                "format": {
                  "description": "The archive format, when the URL's file name does not tell it (.tar.gz, .tgz, .zip, …); without either, libarchive tells it from the bytes.",
                  "enum": [
                    "tar",
                    "tar.gz",
                    "tar.bz2",
                    "tar.xz",
                    "tar.zst",
                    "zip",
                    "7z"
                  ]
                },
                "strip": {
                  "description": "Leading folders dropped from every member's path, as tar --strip-components; a member with no more components than this is skipped. Default: 0.",
                  "type": "integer",
                  "minimum": 0,
                  "maximum": 4095
                },
                "include": {
                  "$ref": "#/$defs/patterns",
                  "description": "Members kept (after strip): those any of these patterns match. Default: every member."
                },
                "exclude": {
                  "$ref": "#/$defs/patterns",
                  "description": "Members left out (after strip) of those include keeps."
                },
                "tree": {
                  "description": "The unpacked tree's digest: Nix's NAR hash in SRI form, SHA-256 only, as `nix hash path DIR` prints it. It covers names, contents, the executable bit and symlink targets.",
                  "type": "string",
                  "pattern": "^sha256-[A-Za-z0-9+/]{43}=$"
                },
                "max_unpacked": {
                  "description": "The most bytes the members may unpack to: a number of bytes, or one followed by K, M, G or T (K = 1024), such as 512M or 2G. Default: 100 times the archive's size, at least 1G.",
                  "oneOf": [
                    {
                      "type": "integer",
                      "minimum": 1
                    },
                    {
                      "type": "string",
                      "pattern": "^[0-9]*[1-9][0-9]*[KkMmGgTt]?(?:[iI]?[bB])?$"
                    }
                  ]
                }
              }
            },
            "list": {
              "description": "A checksum list (sha256sum's or BSD's format) and what its signature must be made by.",
              "type": "object",
              "additionalProperties": false,
              "required": [
                "url",
                "keys"
              ],
              "properties": {
                "url": {
                  "$ref": "#/$defs/url",
                  "description": "Where the list is fetched. ${VAR} references are replaced from the environment."
                },
                "signature": {
                  "description": "auto (default): the first of the list's URL with .minisig, .sig, .asc or .gpg that the server has; clearsigned: the list is signed inside itself (gpg --clearsign), and only its signed text is read; or the signature's own URL.",
                  "oneOf": [
                    {
                      "enum": [
                        "auto",
                        "clearsigned"
                      ]
                    },
                    {
                      "$ref": "#/$defs/url"
                    }
                  ]
                },
                "keys": {
                  "description": "The keys the signature may be made by, one or more: a minisign or signify public key (RW…) or an SSH public key line written inline, or a key file's path relative to the manifest's folder (a minisign, signify or SSH public key, or an OpenPGP keyring); {key, retired: YYYY-MM-DD} trusts a key until the end of that day (UTC) and not after.",
                  "type": "array",
                  "minItems": 1,
                  "items": {
                    "oneOf": [
                      {
                        "type": "string",
                        "minLength": 1
                      },
                      {
                        "type": "object",
                        "additionalProperties": false,
                        "required": [
                          "key"
                        ],
                        "properties": {
                          "key": {
                            "type": "string",
                            "minLength": 1,
                            "description": "A key written inline, or a key file's path."
                          },
                          "retired": {
                            "description": "The last day (UTC) a signature by this key is trusted, as YYYY-MM-DD. (Not typed as a string here: a YAML 1.1 reader makes an unquoted date a date.)",
                            "not": {
                              "type": [
                                "integer",
                                "number",
                                "boolean",
                                "null",
                                "array",
                                "object"
                              ]
                            },
                            "pattern": "^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])$"
                          }
                        }
                      }
                    ]
                  }
                },
                "refresh": {
                  "$ref": "#/$defs/timeout",
                  "description": "After the list's server confirmed the copy, make no request for it for this long, instead of the freshness the server grants. Same form as timeout, at most 24h. Default: the server's."
                }
              }
            },
            "url": {
              "description": "An absolute http:// or https:// URL with a host, after ${VAR} expansion. A ${NAME} reference uses NAME = [A-Za-z_][A-Za-z0-9_]*; the variable must be set.",
              "type": "string",
              "pattern": "^(?:[hH][tT][tT][pP][sS]?://[^/?#\\s]|\\$\\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\\})\\S*$"
            },
            "retries": {
              "description": "Retries after the first attempt, per URL. Default: 3.",
              "type": "integer",
              "minimum": 0,
              "maximum": 100
            },
            "retry_on": {
              "description": "HTTP statuses from 100 to 599 that count as transient: one, or several comma-separated without spaces, each alone or as a range.",
              "oneOf": [
                {
                  "type": "integer",
                  "minimum": 100,
                  "maximum": 599
                },
                {
                  "type": "string",
                  "pattern": "^[1-5][0-9]{2}(?:-[1-5][0-9]{2})?(?:,[1-5][0-9]{2}(?:-[1-5][0-9]{2})?)*$"
                }
              ]
            },
            "timeout": {
              "description": "Stall window: an attempt that makes no progress for this long fails. 250ms, 1.5s, 60s, 5m, 1h or a bare number of seconds; at least 1ms, at most 24h (for m and h, the schema checks only that the value is not zero). Default: 30s.",
              "oneOf": [
                {
                  "type": "number",
                  "minimum": 0.001,
                  "maximum": 86400
                },
                {
                  "type": "string",
                  "pattern": "^(?:0*[1-9][0-9]*(?:\\.[0-9]+)?(?:ms|s|m|h)?|0+\\.[0-9]{0,2}[1-9][0-9]*s?|0+\\.(?=[0-9]*[1-9])[0-9]+[mh])$"
                }
              ]
            },
            "mode": {
              "description": "Permission bits in octal, 0000 to 0777, such as \"0644\" (setuid, setgid and sticky bits are refused). Unquoted 0644 is read as octal too. Default: 0644.",
              "oneOf": [
                {
                  "type": "string",
                  "pattern": "^(?:0[oO])?0*[0-7]{1,3}$"
                },
                {
                  "type": "integer",
                  "minimum": 0,
                  "maximum": 777
                }
              ]
            },
            "headers": {
              "description": "HTTP request headers sent to the url's origin only. Entry headers override defaults with the same name (case-insensitive). ${VAR} references in values are replaced from the environment.",
              "type": "object",
              "propertyNames": {
                "pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
              },
              "additionalProperties": {
                "description": "Header value: no CR, LF or NUL.",
                "type": "string",
                "pattern": "^[^\\r\\n\\u0000]*$"
              }
            },
            "patterns": {
              "description": "One pattern or a list of them, matched against each member's path after strip. * is any run of characters within a name, ? one character, [a-z] and [!a-z] sets, \\ escapes the next character, and ** as a whole component any number of folders. A pattern with a / (other than a trailing one) is anchored at the top of the tree, one without matches a name at any depth, a trailing / matches folders only, and a pattern that matches a folder matches everything inside it.",
              "oneOf": [
                {
                  "$ref": "#/$defs/pattern"
                },
                {
                  "type": "array",
                  "items": {
                    "$ref": "#/$defs/pattern"
                  }
                }
              ]
            },
            "pattern": {
              "description": "A path pattern; haul's loader checks its syntax (an unclosed [, ** inside a name, an empty, . or .. component are refused).",
              "type": "string",
              "minLength": 1,
              "maxLength": 4096,
              "pattern": "^[^\\u0000]*$"
            }
          }
        }

        """##
}

//! `mrtr-gate proxy --config FILE`: every flag of the command in a TOML file, one top-level key
//! per long flag (`drain-timeout = 10`, `allow-origin = ["https://app.example"]`,
//! `consent = ["command", "hook --strict"]`, `command = ["python3", "server.py"]` for the server
//! after `--`). The file is read strictly before anything starts: an unknown key, a value of
//! the wrong type or one the flag refuses is an error naming the file, the line and the key. A
//! flag given on the command line replaces the file's key. `--print-config` prints the
//! effective configuration in the same form (a password in a URL masked) and exits.
//!
//! The file becomes command-line words ([`splice`]) that clap then parses as if typed: one
//! parser and one set of checks for both, so the two cannot drift.

use clap::ArgAction;
use std::ffi::OsString;
use std::path::Path;

/// The key naming the server's argv (the words after `--`).
const COMMAND_KEY: &str = "command";

/// Flags a file may not set: the file itself, what only a person asks for.
const NOT_IN_A_FILE: &[&str] = &["config", "print-config", "help"];

/// The largest config file read.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// `args` (this process's, from the program name on) with the `--config FILE` of a `proxy`
/// command replaced by the file's keys as flags, those the command line gives itself left
/// out; `proxy` is the subcommand's definition (its flags and their parsers). Args without
/// `--config` come back as they are.
pub fn splice(args: Vec<OsString>, proxy: &clap::Command) -> Result<Vec<OsString>, String> {
    if args.get(1).and_then(|a| a.to_str()) != Some("proxy") {
        return Ok(args);
    }
    // The flags end at `--`: what follows is the server's argv.
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let (flags, server) = args.split_at(end);
    let mut path = None;
    let mut kept: Vec<OsString> = Vec::with_capacity(flags.len());
    let mut words = flags.iter().cloned();
    while let Some(word) = words.next() {
        let text = word.to_string_lossy();
        if text == "--config" {
            path = Some(words.next().ok_or("--config needs a FILE")?);
        } else if let Some(file) = text.strip_prefix("--config=") {
            path = Some(OsString::from(file));
        } else {
            kept.push(word);
        }
    }
    let Some(path) = path else {
        return Ok(args);
    };
    let given: Vec<String> = kept
        .iter()
        .filter_map(|w| w.to_str())
        .filter_map(|w| w.strip_prefix("--"))
        .map(|w| w.split('=').next().unwrap_or(w).to_owned())
        .collect();
    let file = read(Path::new(&path), proxy)?;
    let mut out: Vec<OsString> = kept.iter().take(2).cloned().collect();
    for (key, words) in &file.flags {
        if !given.iter().any(|g| g == key) {
            out.extend(words.iter().map(OsString::from));
        }
    }
    out.extend(kept.iter().skip(2).cloned());
    if server.is_empty() {
        if let Some(command) = file.command {
            out.push("--".into());
            out.extend(command.into_iter().map(OsString::from));
        }
    } else {
        out.extend(server.iter().cloned());
    }
    Ok(out)
}

/// A config file read: each key's command-line words, in the file's order, and the server's
/// argv.
#[derive(Debug, Default)]
pub struct FileFlags {
    /// `(key, words)`: `--key value…`, as the flag takes them.
    pub flags: Vec<(String, Vec<String>)>,
    /// `command = [...]`.
    pub command: Option<Vec<String>>,
}

/// Read and check `path` against `proxy`'s flags.
pub fn read(path: &Path, proxy: &clap::Command) -> Result<FileFlags, String> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .map_err(|e| format!("--config {shown}: {e}"))?
        .len();
    if size > MAX_CONFIG_BYTES {
        return Err(format!(
            "--config {shown}: {size} bytes, over the {MAX_CONFIG_BYTES} a config may have"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("--config {shown}: {e}"))?;
    parse(&text, proxy).map_err(|(offset, e)| match offset {
        Some(offset) => format!("{shown}:{}: {e}", line_of(&text, offset)),
        None => format!("{shown}: {e}"),
    })
}

/// The 1-based line of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

type Located = (Option<usize>, String);

fn parse(text: &str, proxy: &clap::Command) -> Result<FileFlags, Located> {
    let doc = toml_edit::Document::parse(text).map_err(|e| {
        let offset = e.span().map(|s| s.start);
        (offset, format!("not TOML: {}", e.message()))
    })?;
    let mut out = FileFlags::default();
    for (key, item) in doc.as_table().iter() {
        let at = doc
            .as_table()
            .key(key)
            .and_then(toml_edit::Key::span)
            .map(|s| s.start);
        let located = |e: String| (at, e);
        if key == COMMAND_KEY {
            let words = strings(item).ok_or_else(|| {
                located(format!(
                    "`{COMMAND_KEY}`: the server's argv, an array of strings"
                ))
            })?;
            if words.is_empty() {
                return Err(located(format!("`{COMMAND_KEY}` is empty")));
            }
            out.command = Some(words);
            continue;
        }
        let arg = proxy
            .get_arguments()
            .find(|a| a.get_long() == Some(key) && !NOT_IN_A_FILE.contains(&key))
            .ok_or_else(|| {
                located(format!(
                    "unknown key `{}`: the keys are the long flags of `mrtr-gate proxy --help` \
                     (and `{COMMAND_KEY}`)",
                    mrtr_gate_host::shown::shown_text(key)
                ))
            })?;
        let words = words_for(arg, key, item).map_err(located)?;
        // The flag's own parser judges its value, as on the command line: the key alone is
        // parsed, and what concerns other flags (one that requires another) is left to the
        // whole command.
        if let Err(e) = proxy
            .clone()
            .try_get_matches_from(std::iter::once("proxy").chain(words.iter().map(String::as_str)))
        {
            use clap::error::ErrorKind;
            if !matches!(
                e.kind(),
                ErrorKind::MissingRequiredArgument
                    | ErrorKind::ArgumentConflict
                    | ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
            ) {
                return Err(located(format!(
                    "`{key}`: {}",
                    first_line(&e.to_string()).trim_start_matches("error: ")
                )));
            }
        }
        out.flags.push((key.to_owned(), words));
    }
    Ok(out)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// The command-line words of `key = item` for `arg`.
fn words_for(arg: &clap::Arg, key: &str, item: &toml_edit::Item) -> Result<Vec<String>, String> {
    let flag = format!("--{key}");
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return match item.as_bool() {
            Some(true) => Ok(vec![flag]),
            Some(false) => Ok(Vec::new()),
            None => Err(format!("`{key}`: true or false")),
        };
    }
    let many_values = arg.get_num_args().is_some_and(|n| n.max_values() > 1);
    let repeatable = matches!(arg.get_action(), ArgAction::Append);
    if let Some(one) = scalar(item) {
        return Ok(vec![flag, one]);
    }
    let values = strings(item).ok_or_else(|| {
        if many_values || repeatable {
            format!("`{key}`: a string, a number, or an array of them")
        } else {
            format!("`{key}`: a string or a number")
        }
    })?;
    if many_values {
        let mut words = vec![flag];
        words.extend(values);
        Ok(words)
    } else if repeatable {
        Ok(values.into_iter().flat_map(|v| [flag.clone(), v]).collect())
    } else {
        Err(format!("`{key}`: one value, not an array"))
    }
}

/// A string or an integer, as the word a flag takes.
fn scalar(item: &toml_edit::Item) -> Option<String> {
    let value = item.as_value()?;
    value
        .as_str()
        .map(str::to_owned)
        .or_else(|| value.as_integer().map(|n| n.to_string()))
}

/// An array of strings or integers.
fn strings(item: &toml_edit::Item) -> Option<Vec<String>> {
    item.as_array()?
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .or_else(|| v.as_integer().map(|n| n.to_string()))
        })
        .collect()
}

/// The effective configuration of a parsed `proxy` command, as a config file holds it: every
/// key with a value (defaults included), the server's argv last; a password in a URL masked.
pub fn render(proxy: &clap::Command, matches: &clap::ArgMatches) -> String {
    let mut out = String::from(
        "# mrtr-gate proxy: the effective configuration (the command line over --config's \
         file, over the defaults)\n",
    );
    let mut command = None;
    for arg in proxy.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(long) = arg.get_long() else {
            if id == COMMAND_KEY {
                command = matches.get_raw(id).map(|v| v.collect::<Vec<_>>());
            }
            continue;
        };
        if NOT_IN_A_FILE.contains(&long) {
            continue;
        }
        if matches!(arg.get_action(), ArgAction::SetTrue) {
            let on = matches.get_flag(id);
            out.push_str(&format!("{long} = {on}\n"));
            continue;
        }
        let Some(raw) = matches.get_raw(id) else {
            continue;
        };
        let values: Vec<String> = raw
            .map(|v| {
                let v = v.to_string_lossy();
                if matches!(long, "redis" | "otlp" | "upstream") {
                    masked_url(&v)
                } else {
                    v.into_owned()
                }
            })
            .collect();
        let many = arg.get_num_args().is_some_and(|n| n.max_values() > 1)
            || matches!(arg.get_action(), ArgAction::Append);
        match values.as_slice() {
            [one] if !many => out.push_str(&format!("{long} = {}\n", toml_value(one))),
            _ => out.push_str(&format!(
                "{long} = [{}]\n",
                values
                    .iter()
                    .map(|v| toml_value(v))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    if let Some(words) = command.filter(|w| !w.is_empty()) {
        let words: Vec<String> = words
            .iter()
            .map(|w| toml_string(&w.to_string_lossy()))
            .collect();
        out.push_str(&format!("{COMMAND_KEY} = [{}]\n", words.join(", ")));
    }
    out
}

/// A number stays a number; anything else is a string.
fn toml_value(text: &str) -> String {
    if !text.is_empty() && text.len() < 19 && text.bytes().all(|b| b.is_ascii_digit()) {
        text.to_owned()
    } else {
        toml_string(text)
    }
}

fn toml_string(text: &str) -> String {
    toml_edit::Value::from(text).to_string().trim().to_owned()
}

/// A URL's password replaced by `***` (`redis://:secret@host/` → `redis://:***@host/`).
fn masked_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            let masked = if userinfo.contains(':') {
                format!("{user}:***")
            } else {
                "***".to_owned()
            };
            format!("{scheme}://{masked}@{host}{path}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_a_redis_url_is_masked() {
        assert_eq!(
            masked_url("redis://:s3cret@10.0.0.1:6379/0"),
            "redis://:***@10.0.0.1:6379/0"
        );
        assert_eq!(masked_url("redis://user:pw@h/"), "redis://user:***@h/");
        assert_eq!(masked_url("redis://token@h/"), "redis://***@h/");
        assert_eq!(masked_url("redis://h:1/"), "redis://h:1/");
    }

    #[test]
    fn lines_are_counted_from_one() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 4), 3);
    }
}

//! Loading a service's TOML configuration with errors that name the file, the line
//! and the field.

use serde::de::DeserializeOwned;
use std::fmt;
use std::path::{Path, PathBuf};

/// A configuration that could not be loaded.
#[derive(Debug)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// The field at fault, when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, ":{l}:{c}")?;
        }
        write!(f, ": ")?;
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// An error about one field, found after parsing (a value that parsed but makes
    /// no sense). The line is looked up in `text`.
    pub fn field(path: &Path, text: &str, field: &str, message: impl Into<String>) -> Self {
        let line = text.lines().position(|l| {
            l.split_once('=')
                .is_some_and(|(k, _)| k.trim().trim_matches('"') == field)
        });
        ConfigError {
            path: path.to_path_buf(),
            line: line.map(|l| l + 1),
            column: line.map(|_| 1),
            field: Some(field.to_string()),
            message: message.into(),
        }
    }
}

/// Parses `text` (read from `path`) as a `T`.
pub fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let (mut line, mut column, mut field) = (None, None, None);
        if let Some(span) = e.span() {
            let before = &text[..span.start.min(text.len())];
            let l = before.matches('\n').count();
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            line = Some(l + 1);
            column = Some(span.start - line_start + 1);
            let line_text = text[line_start..].lines().next().unwrap_or("");
            if let Some((k, _)) = line_text.split_once('=') {
                field = Some(k.trim().trim_matches('"').to_string());
            }
        }
        ConfigError {
            path: path.to_path_buf(),
            line,
            column,
            field,
            message: e.message().trim().to_string(),
        }
    })
}

/// Reads and parses a configuration file.
pub fn load<T: DeserializeOwned>(path: &Path) -> Result<(T, String), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        path: path.to_path_buf(),
        line: None,
        column: None,
        field: None,
        message: format!("cannot read: {e}"),
    })?;
    Ok((parse(path, &text)?, text))
}

/// Resolves a path from a config file relative to the file's folder.
pub fn resolve(config_path: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        config_path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct C {
        name: String,
        policy: crate::msg::Policy,
    }

    #[test]
    fn unknown_field_names_line_and_field() {
        let text = "name = \"a\"\npolicy = \"open\"\nplicy = 3\n";
        let e = parse::<C>(Path::new("x.toml"), text).unwrap_err();
        assert_eq!(e.line, Some(3));
        assert_eq!(e.field.as_deref(), Some("plicy"));
        let s = e.to_string();
        assert!(s.starts_with("x.toml:3:"), "{s}");
        assert!(s.contains("unknown field"), "{s}");
    }

    #[test]
    fn bad_value_names_line_and_field() {
        let text = "name = \"a\"\npolicy = \"port-range 9-3\"\n";
        let e = parse::<C>(Path::new("x.toml"), text).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert_eq!(e.field.as_deref(), Some("policy"));
        assert!(e.to_string().contains("9 is above 3"), "{e}");
    }
}

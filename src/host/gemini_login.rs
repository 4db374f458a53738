//! Whether Gemini CLI is logged in (spec 08 §1, `onboard` step 2). Gemini CLI 0.61.0 has no
//! status command (its `--help`), so the answer is read as the CLI itself decides at start
//! (its bundle, `packages/core` `getAuthTypeFromEnv` and `packages/cli` `validateAuthMethod`):
//!
//! - The auth type is `security.auth.selectedType` of `~/.gemini/settings.json`, else from
//!   the environment: `GOOGLE_GENAI_USE_GCA=true` → `oauth-personal`,
//!   `GOOGLE_GENAI_USE_VERTEXAI=true` → `vertex-ai`, `GOOGLE_GEMINI_BASE_URL` → `gateway`,
//!   `GEMINI_API_KEY` → `gemini-api-key`, `CLOUD_SHELL=true` or
//!   `GEMINI_CLI_USE_COMPUTE_ADC=true` → `compute-default-credentials`. None: the CLI opens
//!   its auth dialog (`02-auth-dialog`), which the daemon answers only with a key.
//! - `gemini-api-key` needs `GEMINI_API_KEY` or the key the CLI saved
//!   (`~/.gemini/gemini-credentials.json`); `vertex-ai` needs `GOOGLE_API_KEY`, or
//!   `GOOGLE_CLOUD_PROJECT` and `GOOGLE_CLOUD_LOCATION`; `oauth-personal` a Google login
//!   (`~/.gemini/oauth_creds.json`); `gateway` and `compute-default-credentials` nothing more.
//! - The environment is the process's, then the first `.env` of `~/.gemini/.env`, `~/.env`
//!   (the CLI loads it without overriding what is set).
//!
//! The decision is [`decide`] (pure); [`check`] gathers the facts.

use std::path::Path;

use super::login::Login;

/// The credentials Gemini CLI keeps in its folder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stored {
    /// `oauth_creds.json` exists (a Google login).
    pub oauth: bool,
    /// `gemini-credentials.json` exists (an API key the CLI saved).
    pub api_key: bool,
}

/// Whether Gemini CLI starts logged in (pure): `selected` is the settings'
/// `security.auth.selectedType`, `env` the environment as the CLI sees it.
pub fn decide(
    selected: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    stored: Stored,
) -> Login {
    let set = |k: &str| env(k).is_some_and(|v| !v.is_empty());
    let is_true = |k: &str| env(k).as_deref() == Some("true");
    let from_env = if is_true("GOOGLE_GENAI_USE_GCA") {
        Some("oauth-personal")
    } else if is_true("GOOGLE_GENAI_USE_VERTEXAI") {
        Some("vertex-ai")
    } else if set("GOOGLE_GEMINI_BASE_URL") {
        Some("gateway")
    } else if set("GEMINI_API_KEY") {
        Some("gemini-api-key")
    } else if is_true("CLOUD_SHELL") || is_true("GEMINI_CLI_USE_COMPUTE_ADC") {
        Some("compute-default-credentials")
    } else {
        None
    };
    let Some(auth) = selected.filter(|s| !s.is_empty()).or(from_env) else {
        return Login::Out;
    };
    let ok = match auth {
        "gemini-api-key" => set("GEMINI_API_KEY") || stored.api_key,
        "vertex-ai" => {
            set("GOOGLE_API_KEY") || (set("GOOGLE_CLOUD_PROJECT") && set("GOOGLE_CLOUD_LOCATION"))
        }
        "oauth-personal" => stored.oauth,
        "gateway" | "compute-default-credentials" | "cloud-shell" => true,
        other => return Login::Unknown(format!("unknown auth type `{other}` in settings.json")),
    };
    if ok {
        Login::In
    } else {
        Login::Out
    }
}

/// The `KEY=value` pairs of a `.env` text (pure): `export ` and quotes dropped, comments and
/// other lines skipped.
fn dotenv(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(crate::launch_env::parse_line)
        .collect()
}

/// Ask whether Gemini CLI, started by a user whose home is `home` and whose environment is
/// `env`, is logged in (reads `~/.gemini/settings.json`, its credential files and the first
/// `.env`; a settings file that does not parse is an unknown answer).
pub fn check(home: &Path, env: &dyn Fn(&str) -> Option<String>) -> Login {
    let Some(folder) = crate::runtime_table::GEMINI.home_folder else {
        return Login::Unknown("the runtime table names no folder of Gemini CLI's".into());
    };
    let dir = home.join(folder);
    let selected = match std::fs::read_to_string(dir.join("settings.json")) {
        Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(v) => v["security"]["auth"]["selectedType"]
                .as_str()
                .map(str::to_string),
            Err(e) => {
                return Login::Unknown(format!("{}: {e}", dir.join("settings.json").display()))
            }
        },
        Err(_) => None,
    };
    let file_env = [dir.join(".env"), home.join(".env")]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|t| dotenv(&t))
        .unwrap_or_default();
    let seen = |k: &str| {
        env(k).or_else(|| {
            file_env
                .iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.clone())
        })
    };
    let stored = Stored {
        oauth: dir.join("oauth_creds.json").is_file(),
        api_key: dir.join("gemini-credentials.json").is_file(),
    };
    decide(selected.as_deref(), &seen, stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    /// Each auth type and what it needs, as Gemini CLI 0.61.0 decides.
    #[test]
    fn each_auth_type_needs_its_credentials() {
        let none = Stored::default();
        let key = env_of(&[("GEMINI_API_KEY", "k")]);
        let empty = env_of(&[]);
        assert_eq!(decide(None, &empty, none), Login::Out);
        assert_eq!(decide(None, &key, none), Login::In);
        assert_eq!(decide(Some("gemini-api-key"), &key, none), Login::In);
        assert_eq!(decide(Some("gemini-api-key"), &empty, none), Login::Out);
        let saved = Stored {
            api_key: true,
            ..none
        };
        assert_eq!(decide(Some("gemini-api-key"), &empty, saved), Login::In);
        assert_eq!(decide(Some("oauth-personal"), &key, none), Login::Out);
        let google = Stored {
            oauth: true,
            ..none
        };
        assert_eq!(decide(Some("oauth-personal"), &empty, google), Login::In);
        assert_eq!(decide(Some("vertex-ai"), &empty, none), Login::Out);
        let project = env_of(&[
            ("GOOGLE_CLOUD_PROJECT", "p"),
            ("GOOGLE_CLOUD_LOCATION", "l"),
        ]);
        assert_eq!(decide(Some("vertex-ai"), &project, none), Login::In);
        let vertex = env_of(&[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_API_KEY", "g"),
        ]);
        assert_eq!(decide(None, &vertex, none), Login::In);
        let only_project = env_of(&[
            ("GOOGLE_GENAI_USE_VERTEXAI", "true"),
            ("GOOGLE_CLOUD_PROJECT", "p"),
        ]);
        assert_eq!(decide(None, &only_project, none), Login::Out);
        let gca = env_of(&[("GOOGLE_GENAI_USE_GCA", "true"), ("GEMINI_API_KEY", "k")]);
        assert_eq!(decide(None, &gca, none), Login::Out);
        assert_eq!(decide(None, &gca, google), Login::In);
        let gateway = env_of(&[("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:1")]);
        assert_eq!(decide(None, &gateway, none), Login::In);
        assert!(matches!(
            decide(Some("other"), &key, none),
            Login::Unknown(_)
        ));
    }

    /// In a temporary HOME: nothing → out; the settings' choice with a saved key, a Google
    /// login, or a key in `~/.gemini/.env` → in; a broken settings file → unknown.
    #[test]
    fn the_files_of_a_home_are_read() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let empty = env_of(&[]);
        assert_eq!(check(h, &empty), Login::Out);
        let dir = h.join(".gemini");
        std::fs::create_dir_all(&dir).unwrap();
        let settings = dir.join("settings.json");
        std::fs::write(
            &settings,
            r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
        )
        .unwrap();
        assert_eq!(check(h, &empty), Login::Out);
        assert_eq!(check(h, &env_of(&[("GEMINI_API_KEY", "k")])), Login::In);
        std::fs::write(dir.join(".env"), "# mine\nexport GEMINI_API_KEY=\"k\"\n").unwrap();
        assert_eq!(check(h, &empty), Login::In);
        std::fs::remove_file(dir.join(".env")).unwrap();
        std::fs::write(dir.join("gemini-credentials.json"), "{}").unwrap();
        assert_eq!(check(h, &empty), Login::In);
        std::fs::write(
            &settings,
            r#"{"security":{"auth":{"selectedType":"oauth-personal"}}}"#,
        )
        .unwrap();
        assert_eq!(check(h, &empty), Login::Out);
        std::fs::write(dir.join("oauth_creds.json"), "{}").unwrap();
        assert_eq!(check(h, &empty), Login::In);
        std::fs::write(&settings, "{not json").unwrap();
        assert!(matches!(check(h, &empty), Login::Unknown(_)));
    }
}

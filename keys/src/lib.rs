//! The lab's keys. `intlab site init` makes a private certificate authority for one lab and
//! signs two certificates with it: one that every site server shows and one that a coordinator
//! shows. The authority's own key is thrown away once both are signed, so nobody can make a
//! third: a peer is a member of the lab exactly when it holds one of the two. A site accepts
//! only coordinators (certificates made for client use) and a coordinator only sites (made for
//! server use), so a stolen site key cannot drive other sites.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// The authority's certificate: every member trusts it and nothing else.
pub const AUTHORITY: &str = "authority.pem";
/// The name a site's certificate is made for; coordinators check it whatever address they dial.
pub const SITE_NAME: &str = "intlab-site";
/// The name a coordinator's certificate is made for (carried, not checked: the purpose is).
pub const COORDINATOR_NAME: &str = "intlab-coordinator";

/// Where the keys are when no folder is named: `$INTLAB_KEYS`, else `intlab/keys` under the
/// user's configuration folder (`$XDG_CONFIG_HOME`, else `~/.config`).
pub fn default_folder() -> PathBuf {
    if let Some(k) = std::env::var_os("INTLAB_KEYS") {
        return PathBuf::from(k);
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from("."));
    config.join("intlab").join("keys")
}

/// Which side of the control connection a key is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `intlab site serve`: a TLS server that asks for the coordinator's certificate.
    Site,
    /// `intlab run --sites`: a TLS client that shows its own.
    Coordinator,
}

impl Role {
    /// The file stem of this role's certificate and key.
    pub fn stem(self) -> &'static str {
        match self {
            Role::Site => "site",
            Role::Coordinator => "coordinator",
        }
    }

    fn certificate(self) -> String {
        format!("{}.pem", self.stem())
    }

    fn key(self) -> String {
        format!("{}.key", self.stem())
    }
}

/// What went wrong making or reading keys.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A file could not be read or written.
    #[error("{path}: {cause}")]
    File {
        /// The file.
        path: PathBuf,
        /// What the system said.
        cause: std::io::Error,
    },
    /// A file holds no usable certificate or key.
    #[error("{path}: {what}")]
    Content {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// `init` would overwrite keys a lab may be using.
    #[error(
        "{0} exists already: remove the folder's keys first to make new ones (every machine then needs the new ones)"
    )]
    Exists(PathBuf),
    /// Making a certificate failed.
    #[error("making a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The TLS library refused the configuration.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// Makes a new lab's keys in `folder` (created if missing, private to its owner): the
/// authority's certificate and a certificate and key for each [`Role`]. Returns the files.
pub fn init(folder: &Path) -> Result<Vec<PathBuf>, KeyError> {
    let files: Vec<PathBuf> = [AUTHORITY.to_owned()]
        .into_iter()
        .chain(
            [Role::Site, Role::Coordinator]
                .iter()
                .flat_map(|r| [r.certificate(), r.key()]),
        )
        .map(|f| folder.join(f))
        .collect();
    if let Some(f) = files.iter().find(|f| f.exists()) {
        return Err(KeyError::Exists(f.clone()));
    }
    let file_err = |path: &Path| {
        let path = path.to_path_buf();
        move |cause| KeyError::File { path, cause }
    };
    std::fs::create_dir_all(folder).map_err(file_err(folder))?;
    set_mode(folder, 0o700)?;

    let mut authority = CertificateParams::new(Vec::<String>::new())?;
    authority.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    authority
        .distinguished_name
        .push(DnType::CommonName, "intlab lab authority");
    authority.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let authority_key = KeyPair::generate()?;
    let authority_cert = authority.self_signed(&authority_key)?;
    write_private(&folder.join(AUTHORITY), authority_cert.pem().as_bytes(), 0o644)?;
    let issuer = Issuer::new(authority, authority_key);

    for role in [Role::Site, Role::Coordinator] {
        let (name, purpose) = match role {
            Role::Site => (SITE_NAME, ExtendedKeyUsagePurpose::ServerAuth),
            Role::Coordinator => (COORDINATOR_NAME, ExtendedKeyUsagePurpose::ClientAuth),
        };
        let mut params = CertificateParams::new(vec![name.to_owned()])?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![purpose];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        write_private(&folder.join(role.certificate()), cert.pem().as_bytes(), 0o644)?;
        write_private(&folder.join(role.key()), key.serialize_pem().as_bytes(), 0o600)?;
    }
    Ok(files)
}

/// Writes `bytes` to a new file created with `mode` (a key is never readable by others, not
/// even for a moment).
fn write_private(path: &Path, bytes: &[u8], mode: u32) -> Result<(), KeyError> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |cause| KeyError::File {
        path: path.to_path_buf(),
        cause,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(err)?;
    f.write_all(bytes).map_err(err)
}

fn set_mode(path: &Path, mode: u32) -> Result<(), KeyError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|cause| KeyError::File {
        path: path.to_path_buf(),
        cause,
    })
}

/// One member's keys, read from a folder [`init`] made: what it trusts and what it shows.
#[derive(Debug)]
pub struct LabKeys {
    role: Role,
    authority: RootCertStore,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl LabKeys {
    /// Reads `role`'s certificate and key and the authority from `folder`.
    pub fn load(folder: &Path, role: Role) -> Result<LabKeys, KeyError> {
        let authority_file = folder.join(AUTHORITY);
        let mut authority = RootCertStore::empty();
        for cert in certificates(&authority_file)? {
            authority.add(cert).map_err(|e| KeyError::Content {
                path: authority_file.clone(),
                what: e.to_string(),
            })?;
        }
        let chain = certificates(&folder.join(role.certificate()))?;
        let key_file = folder.join(role.key());
        let text = read(&key_file)?;
        let key = PrivateKeyDer::from_pem_slice(&text).map_err(|e| KeyError::Content {
            path: key_file.clone(),
            what: format!("no private key ({e})"),
        })?;
        Ok(LabKeys {
            role,
            authority,
            chain,
            key,
        })
    }

    /// The TLS server configuration of a site: shows the site certificate, demands a
    /// coordinator's.
    pub fn site_config(&self) -> Result<Arc<ServerConfig>, KeyError> {
        debug_assert_eq!(self.role, Role::Site);
        let provider = provider();
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(self.authority.clone()), provider.clone())
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        let config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        Ok(Arc::new(config))
    }

    /// The TLS client configuration of a coordinator: shows its certificate, trusts only sites
    /// of the same lab.
    pub fn coordinator_config(&self) -> Result<Arc<ClientConfig>, KeyError> {
        debug_assert_eq!(self.role, Role::Coordinator);
        let config = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(self.authority.clone())
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())?;
        Ok(Arc::new(config))
    }
}

/// The name a coordinator checks a site's certificate against.
pub fn site_server_name() -> ServerName<'static> {
    ServerName::try_from(SITE_NAME).expect("a valid DNS name")
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, KeyError> {
    std::fs::read(path).map_err(|cause| KeyError::File {
        path: path.to_path_buf(),
        cause,
    })
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, KeyError> {
    let text = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| KeyError::Content {
            path: path.to_path_buf(),
            what: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(KeyError::Content {
            path: path.to_path_buf(),
            what: "no certificate".into(),
        });
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_makes_keys_that_load_as_both_configurations_and_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("keys");
        let files = init(&folder).unwrap();
        assert_eq!(files.len(), 5);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(folder.join("site.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "a key is private to its owner");
        let site = LabKeys::load(&folder, Role::Site).unwrap();
        site.site_config().unwrap();
        let coordinator = LabKeys::load(&folder, Role::Coordinator).unwrap();
        coordinator.coordinator_config().unwrap();
        assert!(matches!(init(&folder), Err(KeyError::Exists(_))));
    }

    #[test]
    fn a_missing_or_empty_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = LabKeys::load(dir.path(), Role::Site).unwrap_err().to_string();
        assert!(e.contains(AUTHORITY), "{e}");
        std::fs::write(dir.path().join(AUTHORITY), "nothing").unwrap();
        let e = LabKeys::load(dir.path(), Role::Site).unwrap_err().to_string();
        assert!(e.contains("no certificate"), "{e}");
    }
}

//! The production [`LibraryLoader`]: real `.so` files through the plugin
//! API's host loader (`dlopen`, root-module layout check, API version
//! check). Libraries are never unloaded.

use std::path::Path;
use std::sync::Arc;

use dsh_plugin_api::host::{CreateRequest, LoadError, PluginInstance, PluginLibrary};
use dsh_plugin_api::{Error as PluginError, Service};
use futures::future::BoxFuture;

use crate::lifecycle::{CreateInput, Factory, Instance};
use crate::loader::{LibraryLoader, LoadFailure, LoadedLibrary, PluginDescriptor};
use crate::validation::LibraryProblem;

/// Opens plugin libraries with the dynamic loader.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DlopenLoader;

impl LibraryLoader for DlopenLoader {
    fn load(&self, path: &Path) -> Result<LoadedLibrary, LoadFailure> {
        let library = PluginLibrary::load(path).map_err(|err| LoadFailure {
            problem: match &err {
                LoadError::Open { .. } => LibraryProblem::Open,
                LoadError::NotAPlugin { .. } => LibraryProblem::NotAPlugin,
                LoadError::Incompatible { .. } => LibraryProblem::Incompatible,
            },
            message: err.to_string(),
        })?;
        let loaded = library.descriptor();
        let descriptor = PluginDescriptor {
            name: loaded.name.clone(),
            version: loaded.version.clone(),
            api_version: loaded.api_version,
            provides: loaded.provides.clone(),
            inject: loaded.inject.clone(),
        };
        Ok(LoadedLibrary {
            descriptor,
            factory: Arc::new(LibraryFactory(library)),
        })
    }
}

struct LibraryFactory(PluginLibrary);

impl Factory for LibraryFactory {
    fn validate_config(
        &self,
        config: &serde_json::Value,
    ) -> Result<Vec<dsh_plugin_api::FieldError>, PluginError> {
        self.0.validate_config(config)
    }

    fn create(&self, input: CreateInput) -> BoxFuture<'_, Result<Box<dyn Instance>, PluginError>> {
        Box::pin(async move {
            let instance = self
                .0
                .create(CreateRequest {
                    id: input.id,
                    config: input.config,
                    services: input.services,
                })
                .await?;
            Ok(Box::new(LibraryInstance(instance)) as Box<dyn Instance>)
        })
    }
}

struct LibraryInstance(PluginInstance);

impl Instance for LibraryInstance {
    fn services(&self) -> Vec<Service> {
        self.0.services().to_vec()
    }

    fn dispose(self: Box<Self>) -> BoxFuture<'static, Result<(), PluginError>> {
        Box::pin(self.0.dispose())
    }
}

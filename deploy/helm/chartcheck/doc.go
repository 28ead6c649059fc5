// Package chartcheck renders the Helm chart in deploy/helm/dedup with the
// real Helm engine (helm.sh/helm/v3) and holds the rendered manifests to the
// checks of deploy/k8scheck, the ones the plain manifests pass. It is a
// module of its own so that the stage's go.mod does not depend on Helm;
// .ci/run runs its tests.
package chartcheck

"""Server-side field ownership: `metadata.managedFields`, as kube-apiserver keeps it.

No maintained Python library implements structured-merge-diff, so this package follows
`sigs.k8s.io/structured-merge-diff/v4` (field sets, typed merge and compare) and
`k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager` (managers, conflicts, timestamps):
`typeinfo` turns the kind's OpenAPI into the list/map semantics SMD works from, `fieldpath`
holds field sets in their FieldsV1 form, `typed` walks objects against those types, and
`managed` is the field manager an object write calls.
"""

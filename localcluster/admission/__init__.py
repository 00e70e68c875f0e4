"""Validating admission webhooks, called by the local API server as kube-apiserver calls them.

`configuration` serves `admissionregistration.k8s.io/v1` ValidatingWebhookConfigurations (defaults
and validation as the real registry), `matching` decides which webhooks a request goes to (rules,
scope, matchPolicy, namespace and object selectors), `review` builds the AdmissionReview and reads
its answer, `caller` posts it over HTTPS verified against the webhook's caBundle, and `dispatcher`
ties them together for the REST layer.
"""

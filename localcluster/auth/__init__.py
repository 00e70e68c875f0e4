"""Authentication and authorization of the local cluster: who is asking, and may they.

Off by default (demos and most tests run as one all-powerful user); `LocalCluster(authz=True)`
enforces it on every request, as kube-apiserver with `--authorization-mode=RBAC` does. The
TokenReview, SubjectAccessReview and TokenRequest APIs and the RBAC kinds are served either way.
"""

"""Column descriptions of the real server's Table printer (`pkg/printers/internalversion`) for the
kinds `kubectl get -o wide` is most used on: the text kube-apiserver v1.24 sends, column by column."""

from __future__ import annotations

DESCRIPTIONS: dict[str, dict[str, str]] = {
    "Node": {
        "Status": "The status of the node",
        "Roles": "The roles of the node",
        "Version": "Kubelet Version reported by the node.",
        "Internal-IP": (
            "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https"
            "://kubernetes.io/docs/concepts/nodes/node/#addresses Note: This field is declared as mergeable, but "
            "the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers"
            " should instead use a full-replacement patch. See http://pr.k8s.io/79391 for an example."
        ),
        "External-IP": (
            "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https"
            "://kubernetes.io/docs/concepts/nodes/node/#addresses Note: This field is declared as mergeable, but "
            "the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers"
            " should instead use a full-replacement patch. See http://pr.k8s.io/79391 for an example."
        ),
        "OS-Image": "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        "Kernel-Version": "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        "Container-Runtime": "ContainerRuntime Version reported by the node through runtime remote API (e.g. docker://1.5.0).",
    },
    "Pod": {
        "Ready": "The aggregate readiness state of this pod for accepting traffic.",
        "Status": "The aggregate status of the containers in this pod.",
        "Restarts": (
            "The number of times the containers in this pod have been restarted and when the last container in th"
            "is pod has restarted."
        ),
        "IP": "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
        "Node": (
            "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler s"
            "imply schedules this pod onto that node, assuming that it fits resource requirements."
        ),
        "Nominated Node": (
            "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be schedu"
            "led right away as preemption victims receive their graceful termination periods. This field does not"
            " guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewh"
            "ere if other nodes become available sooner. Scheduler may also decide to give the resources on this "
            "node to a higher priority pod that is created after preemption. As a result, this field may be diffe"
            "rent than PodSpec.nodeName when the pod is scheduled."
        ),
        "Readiness Gates": (
            "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its c"
            'ontainers are ready AND all conditions specified in the readiness gates have status equal to "True" '
            "More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"
        ),
    },
    "Deployment": {
        "Ready": "Number of the pod with ready state",
        "Up-to-date": "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        "Available": "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        "Containers": "Names of each container in the template.",
        "Images": "Images referenced by each container in the template.",
        "Selector": (
            "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affec"
            "ted by this deployment."
        ),
    },
    "ReplicaSet": {
        "Desired": (
            "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero a"
            "nd unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/"
            "replicationcontroller/#what-is-a-replicationcontroller"
        ),
        "Current": (
            "Replicas is the most recently oberved number of replicas. More info: https://kubernetes.io/docs/conc"
            "epts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller"
        ),
        "Ready": "The number of ready replicas for this replica set.",
        "Containers": "Names of each container in the template.",
        "Images": "Images referenced by each container in the template.",
        "Selector": (
            "Selector is a label query over pods that should match the replica count. If the selector is empty, i"
            "t is defaulted to the labels present on the pod template. Label keys and values that must match in o"
            "rder to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/w"
            "orking-with-objects/labels/#label-selectors"
        ),
    },
    "Service": {
        "Type": (
            "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, C"
            'lusterIP, NodePort, and LoadBalancer. "ClusterIP" allocates a cluster-internal IP address for load-b'
            "alancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manu"
            'al construction of an Endpoints object or EndpointSlice objects. If clusterIP is "None", no virtual '
            'IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. "Nod'
            'ePort" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as '
            'the clusterIP. "LoadBalancer" builds on NodePort and creates an external load-balancer (if supported'
            ' in the current cloud) which routes to the same endpoints as the clusterIP. "ExternalName" aliases t'
            "his service to the specified externalName. Several other fields do not apply to ExternalName service"
            "s. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-s"
            "ervice-types"
        ),
        "Cluster-IP": (
            "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specif"
            "ied manually, is in-range (as per system configuration), and is not in use, it will be allocated to "
            "the service; otherwise creation of the service will fail. This field may not be changed through upda"
            "tes unless the type field is also being changed to ExternalName (which requires this field to be bla"
            "nk) or the type field is being changed from ExternalName (in which case this field may optionally be"
            ' specified, as describe above).  Valid values are "None", empty string (""), or a valid IP address. '
            'Setting this to "None" makes a "headless service" (no virtual IP), which is useful when direct endpo'
            "int connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePo"
            "rt, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creat"
            "ion will fail. This field will be wiped when updating a Service to type ExternalName. More info: htt"
            "ps://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies"
        ),
        "External-IP": (
            "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for th"
            "is service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that tra"
            "ffic arrives at a node with this IP.  A common example is external load-balancers that are not part "
            "of the Kubernetes system."
        ),
        "Port(s)": (
            "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/s"
            "ervices-networking/service/#virtual-ips-and-service-proxies"
        ),
        "Selector": (
            "Route service traffic to pods with label keys and values matching this selector. If empty or not pre"
            "sent, the service is assumed to have an external process managing its endpoints, which Kubernetes wi"
            "ll not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is Exter"
            "nalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/"
        ),
    },
}

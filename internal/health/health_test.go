// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"hash/fnv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// object decodes a YAML object as the API machinery would: through JSON,
// so that integers are int64 as in an informer's cache, not float64.
func object(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("test object: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatalf("test object: %v", err)
	}
	return u
}

const deploymentAvailable = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, generation: 4}
spec:
  replicas: 3
  progressDeadlineSeconds: 600
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
status:
  observedGeneration: 4
  replicas: 3
  updatedReplicas: 3
  readyReplicas: 3
  availableReplicas: 3
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable, message: Deployment has minimum availability., lastUpdateTime: "2026-01-10T09:00:00Z", lastTransitionTime: "2026-01-10T09:00:00Z"}
  - {type: Progressing, status: "True", reason: NewReplicaSetAvailable, message: ReplicaSet "web-6d4cf56db6" has successfully progressed., lastUpdateTime: "2026-01-10T09:01:00Z", lastTransitionTime: "2026-01-10T08:59:00Z"}
`

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  string
		want Status
		// msg, if set, is a part of the message Of must return.
		msg string
	}{
		{
			name: "Deployment available",
			obj:  deploymentAvailable,
			want: Current,
			msg:  "Replicas: 3",
		},
		{
			name: "Deployment rolling out",
			obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, generation: 5}
spec: {replicas: 3, progressDeadlineSeconds: 600}
status:
  observedGeneration: 5
  replicas: 4
  updatedReplicas: 1
  readyReplicas: 3
  availableReplicas: 3
  unavailableReplicas: 1
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable}
  - {type: Progressing, status: "True", reason: ReplicaSetUpdated, message: ReplicaSet "web-7f9c" is progressing.}
`,
			want: InProgress,
			msg:  "Updated: 1/3",
		},
		{
			name: "Deployment past its progress deadline",
			obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, generation: 5}
spec: {replicas: 3, progressDeadlineSeconds: 600}
status:
  observedGeneration: 5
  replicas: 4
  updatedReplicas: 1
  readyReplicas: 3
  availableReplicas: 3
  conditions:
  - {type: Available, status: "True", reason: MinimumReplicasAvailable}
  - {type: Progressing, status: "False", reason: ProgressDeadlineExceeded, message: ReplicaSet "web-7f9c" has timed out progressing.}
`,
			want: Failed,
			msg:  "Progress deadline exceeded",
		},
		{
			name: "Deployment its controller has not seen yet",
			obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, generation: 1}
spec: {replicas: 2}
`,
			want: InProgress,
		},
		{
			name: "Deployment whose new spec is not observed yet",
			obj:  strings.Replace(deploymentAvailable, "generation: 4", "generation: 5", 1),
			want: InProgress,
			msg:  "generation is 5, but latest observed generation is 4",
		},
		{
			name: "StatefulSet current",
			obj: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop, generation: 2}
spec: {replicas: 3, serviceName: db, updateStrategy: {type: RollingUpdate}}
status:
  observedGeneration: 2
  replicas: 3
  readyReplicas: 3
  currentReplicas: 3
  updatedReplicas: 3
  availableReplicas: 3
  currentRevision: db-5c7b8d9f4
  updateRevision: db-5c7b8d9f4
`,
			want: Current,
		},
		{
			name: "StatefulSet rolling out",
			obj: `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop, generation: 3}
spec: {replicas: 3, serviceName: db, updateStrategy: {type: RollingUpdate}}
status:
  observedGeneration: 3
  replicas: 3
  readyReplicas: 3
  currentReplicas: 2
  updatedReplicas: 1
  currentRevision: db-5c7b8d9f4
  updateRevision: db-66f8b7c9d
`,
			want: InProgress,
			msg:  "current: 2/3",
		},
		{
			name: "DaemonSet current",
			obj: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system, generation: 1}
spec: {selector: {matchLabels: {app: agent}}}
status:
  observedGeneration: 1
  desiredNumberScheduled: 3
  currentNumberScheduled: 3
  updatedNumberScheduled: 3
  numberAvailable: 3
  numberReady: 3
  numberMisscheduled: 0
`,
			want: Current,
		},
		{
			name: "DaemonSet with a node not ready yet",
			obj: `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system, generation: 2}
spec: {selector: {matchLabels: {app: agent}}}
status:
  observedGeneration: 2
  desiredNumberScheduled: 3
  currentNumberScheduled: 3
  updatedNumberScheduled: 3
  numberAvailable: 2
  numberReady: 2
  numberUnavailable: 1
`,
			want: InProgress,
			msg:  "Available: 2/3",
		},
		{
			name: "ReplicaSet current",
			obj: `
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-6d4cf56db6, namespace: shop, generation: 1}
spec: {replicas: 2}
status: {observedGeneration: 1, replicas: 2, fullyLabeledReplicas: 2, readyReplicas: 2, availableReplicas: 2}
`,
			want: Current,
		},
		{
			name: "ReplicaSet scaling up",
			obj: `
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-6d4cf56db6, namespace: shop, generation: 2}
spec: {replicas: 4}
status: {observedGeneration: 2, replicas: 4, fullyLabeledReplicas: 4, readyReplicas: 2, availableReplicas: 2}
`,
			want: InProgress,
			msg:  "Available: 2/4",
		},
		{
			name: "Job complete",
			obj: `
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: shop, generation: 1}
spec: {completions: 1, parallelism: 1, backoffLimit: 6}
status:
  startTime: "2026-01-10T09:00:00Z"
  completionTime: "2026-01-10T09:00:42Z"
  succeeded: 1
  conditions:
  - {type: SuccessCriteriaMet, status: "True", reason: CompletionsReached}
  - {type: Complete, status: "True", reason: CompletionsReached}
`,
			want: Current,
			msg:  "Job Completed",
		},
		{
			name: "Job failed",
			obj: `
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: shop, generation: 1}
spec: {completions: 1, parallelism: 1, backoffLimit: 2}
status:
  startTime: "2026-01-10T09:00:00Z"
  failed: 3
  conditions:
  - {type: FailureTarget, status: "True", reason: BackoffLimitExceeded, message: Job has reached the specified backoff limit}
  - {type: Failed, status: "True", reason: BackoffLimitExceeded, message: Job has reached the specified backoff limit}
`,
			want: Failed,
			msg:  "Job Failed",
		},
		{
			name: "Pod running and ready",
			obj: `
apiVersion: v1
kind: Pod
metadata: {name: web-6d4cf56db6-x2x9k, namespace: shop}
spec: {containers: [{name: web, image: nginx:1.27}]}
status:
  phase: Running
  conditions:
  - {type: PodScheduled, status: "True"}
  - {type: Initialized, status: "True"}
  - {type: ContainersReady, status: "True"}
  - {type: Ready, status: "True"}
  containerStatuses:
  - {name: web, ready: true, restartCount: 0, state: {running: {startedAt: "2026-01-10T09:00:03Z"}}}
`,
			want: Current,
		},
		{
			name: "Pod pending",
			obj: `
apiVersion: v1
kind: Pod
metadata: {name: web-6d4cf56db6-x2x9k, namespace: shop}
spec: {containers: [{name: web, image: nginx:1.27}]}
status:
  phase: Pending
  conditions:
  - {type: PodScheduled, status: "True"}
  containerStatuses:
  - {name: web, ready: false, restartCount: 0, state: {waiting: {reason: ContainerCreating}}}
`,
			want: InProgress,
			msg:  "Pending",
		},
		{
			name: "Pod crash looping",
			obj: `
apiVersion: v1
kind: Pod
metadata: {name: web-6d4cf56db6-x2x9k, namespace: shop}
spec: {containers: [{name: web, image: nginx:1.27}]}
status:
  phase: Running
  conditions:
  - {type: Ready, status: "False", reason: ContainersNotReady}
  containerStatuses:
  - {name: web, ready: false, restartCount: 5, state: {waiting: {reason: CrashLoopBackOff, message: back-off 2m40s restarting failed container}}}
`,
			want: Failed,
			msg:  "CrashLoop",
		},
		{
			name: "PersistentVolumeClaim bound",
			obj: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: shop}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
status: {phase: Bound, accessModes: [ReadWriteOnce], capacity: {storage: 1Gi}}
`,
			want: Current,
		},
		{
			name: "PersistentVolumeClaim pending",
			obj: `
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: shop}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
status: {phase: Pending}
`,
			want: InProgress,
			msg:  "phase: Pending",
		},
		{
			name: "LoadBalancer Service without ingress",
			obj: `
apiVersion: v1
kind: Service
metadata: {name: front, namespace: shop}
spec: {type: LoadBalancer, clusterIP: 10.0.0.17, ports: [{port: 80}]}
status: {loadBalancer: {}}
`,
			want: InProgress,
			msg:  "load balancer",
		},
		{
			name: "LoadBalancer Service with ingress",
			obj: `
apiVersion: v1
kind: Service
metadata: {name: front, namespace: shop}
spec: {type: LoadBalancer, clusterIP: 10.0.0.17, ports: [{port: 80}]}
status: {loadBalancer: {ingress: [{ip: 203.0.113.10}]}}
`,
			want: Current,
		},
		{
			name: "LoadBalancer Service with external IPs",
			obj: `
apiVersion: v1
kind: Service
metadata: {name: front, namespace: shop}
spec: {type: LoadBalancer, clusterIP: 10.0.0.17, externalIPs: [198.51.100.7], ports: [{port: 80}]}
status: {loadBalancer: {}}
`,
			want: Current,
		},
		{
			name: "LoadBalancer Service being deleted",
			obj: `
apiVersion: v1
kind: Service
metadata: {name: front, namespace: shop, deletionTimestamp: "2026-01-10T09:00:00Z", finalizers: [service.kubernetes.io/load-balancer-cleanup]}
spec: {type: LoadBalancer, clusterIP: 10.0.0.17, ports: [{port: 80}]}
status: {loadBalancer: {}}
`,
			want: Terminating,
		},
		{
			name: "CustomResourceDefinition established",
			obj: `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com, generation: 1}
spec: {group: example.com, names: {kind: Widget, plural: widgets}, scope: Namespaced}
status:
  acceptedNames: {kind: Widget, plural: widgets}
  storedVersions: [v1]
  conditions:
  - {type: NamesAccepted, status: "True", reason: NoConflicts, message: no conflicts found}
  - {type: Established, status: "True", reason: InitialNamesAccepted, message: the initial names have been accepted}
`,
			want: Current,
		},
		{
			name: "CustomResourceDefinition with a name taken",
			obj: `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com, generation: 1}
spec: {group: example.com, names: {kind: Widget, plural: widgets}, scope: Namespaced}
status:
  conditions:
  - {type: NamesAccepted, status: "False", reason: PluralConflict, message: '"widgets" is already in use'}
  - {type: Established, status: "False", reason: NotAccepted, message: not all names are accepted}
`,
			want: Failed,
		},
		{
			name: "custom resource Ready",
			obj: `
apiVersion: cache.example.com/v1
kind: Redis
metadata: {name: sessions, namespace: shop, generation: 3}
spec: {size: 3}
status:
  observedGeneration: 3
  conditions:
  - {type: Ready, status: "True", reason: Reconciled, message: all members up}
`,
			want: Current,
		},
		{
			name: "custom resource not Ready",
			obj: `
apiVersion: cache.example.com/v1
kind: Redis
metadata: {name: sessions, namespace: shop, generation: 3}
spec: {size: 3}
status:
  observedGeneration: 3
  conditions:
  - {type: Ready, status: "False", reason: MembersJoining, message: 1 of 3 members joined}
`,
			want: InProgress,
			msg:  "1 of 3 members joined",
		},
		{
			name: "custom resource Stalled",
			obj: `
apiVersion: cache.example.com/v1
kind: Redis
metadata: {name: sessions, namespace: shop, generation: 3}
spec: {size: 3}
status:
  observedGeneration: 3
  conditions:
  - {type: Ready, status: "False", reason: InvalidSpec, message: size must be odd}
  - {type: Stalled, status: "True", reason: InvalidSpec, message: size must be odd}
`,
			want: Failed,
			msg:  "size must be odd",
		},
		{
			name: "custom resource Reconciling",
			obj: `
apiVersion: cache.example.com/v1
kind: Redis
metadata: {name: sessions, namespace: shop, generation: 3}
spec: {size: 3}
status:
  observedGeneration: 3
  conditions:
  - {type: Ready, status: "True", reason: Reconciled}
  - {type: Reconciling, status: "True", reason: Resizing, message: growing to 3 members}
`,
			want: InProgress,
			msg:  "growing to 3 members",
		},
		{
			name: "custom resource whose new spec is not observed yet",
			obj: `
apiVersion: cache.example.com/v1
kind: Redis
metadata: {name: sessions, namespace: shop, generation: 4}
spec: {size: 5}
status:
  observedGeneration: 3
  conditions:
  - {type: Ready, status: "True", reason: Reconciled}
`,
			want: InProgress,
			msg:  "Redis generation is 4, but latest observed generation is 3",
		},
		{
			name: "object being deleted",
			obj: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, generation: 4, deletionTimestamp: "2026-01-10T09:00:00Z", finalizers: [foregroundDeletion]}
spec: {replicas: 3}
status: {observedGeneration: 4, replicas: 3, updatedReplicas: 3, readyReplicas: 3, availableReplicas: 3}
`,
			want: Terminating,
		},
		{
			name: "conditions that are not a list",
			obj: `
apiVersion: cache.example.com/v1
kind: Redis
metadata: {name: sessions, namespace: shop}
status: {conditions: ready}
`,
			want: Unknown,
			msg:  "cannot compute status",
		},
		{
			// kstatus asserts container statuses are objects: Of must
			// not panic on one that is not.
			name: "Pod with a malformed container status",
			obj: `
apiVersion: v1
kind: Pod
metadata: {name: odd, namespace: shop}
status: {phase: Running, containerStatuses: [web]}
`,
			want: Unknown,
			msg:  "cannot compute status",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := object(t, tc.obj)
			before := u.DeepCopy()
			got, msg := Of(u)
			if got != tc.want {
				t.Errorf("Of = %s (%q), want %s", got, msg, tc.want)
			}
			if !strings.Contains(msg, tc.msg) {
				t.Errorf("Of message = %q, want it to contain %q", msg, tc.msg)
			}
			if msg == "" {
				t.Errorf("Of message is empty")
			}
			// Of runs on informers' shared objects.
			if diff := cmp.Diff(before.Object, u.Object); diff != "" {
				t.Errorf("Of changed the object (-before +after):\n%s", diff)
			}
		})
	}
}

// TestObjectsWithoutStatusAreCurrent checks that kinds with no status to
// wait for are Current as soon as they exist, whether kstatus knows them
// (ConfigMap, Secret, Service) or falls back to its generic rules.
func TestObjectsWithoutStatusAreCurrent(t *testing.T) {
	for _, doc := range []string{
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: settings, namespace: shop}, data: {mode: fast}}`,
		`{apiVersion: v1, kind: Secret, metadata: {name: creds, namespace: shop}, type: Opaque, data: {password: aHVudGVyMg==}}`,
		`{apiVersion: v1, kind: Service, metadata: {name: web, namespace: shop}, spec: {type: ClusterIP, clusterIP: 10.0.0.12, ports: [{port: 80}]}, status: {loadBalancer: {}}}`,
		`{apiVersion: v1, kind: Service, metadata: {name: db, namespace: shop}, spec: {clusterIP: None, ports: [{port: 5432}]}}`,
		`{apiVersion: v1, kind: ServiceAccount, metadata: {name: web, namespace: shop}}`,
		`{apiVersion: v1, kind: Namespace, metadata: {name: shop}, spec: {finalizers: [kubernetes]}, status: {phase: Active}}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: reader, namespace: shop}, rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: reader, namespace: shop}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}, subjects: [{kind: ServiceAccount, name: web, namespace: shop}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: shop-reader}, rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: shop-reader}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: shop-reader}, subjects: [{kind: ServiceAccount, name: web, namespace: shop}]}`,
		`{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: web, namespace: shop, generation: 1}, spec: {minAvailable: 1}, status: {observedGeneration: 1, currentHealthy: 3, desiredHealthy: 1, disruptionsAllowed: 2, expectedPods: 3}}`,
		`{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: deny-all, namespace: shop, generation: 1}, spec: {podSelector: {}, policyTypes: [Ingress]}}`,
	} {
		u := object(t, doc)
		t.Run(u.GetKind()+"/"+u.GetName(), func(t *testing.T) {
			if got, msg := Of(u); got != Current {
				t.Errorf("Of = %s (%q), want Current", got, msg)
			}
		})
	}
}

func TestNilIsNotFound(t *testing.T) {
	if got, msg := Of(nil); got != NotFound || msg != "not found" {
		t.Errorf("Of(nil) = %s, %q; want NotFound, \"not found\"", got, msg)
	}
}

// TestStatusStrings pins the words written to the API.
func TestStatusStrings(t *testing.T) {
	got := []Status{Current, InProgress, Failed, Terminating, NotFound, Unknown}
	want := []Status{"Current", "InProgress", "Failed", "Terminating", "NotFound", "Unknown"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

func TestMessagesAreShortSingleLines(t *testing.T) {
	long := strings.Repeat("étape ", 100)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"short", "Deployment is available. Replicas: 3", "Deployment is available. Replicas: 3"},
		{"exactly the limit", strings.Repeat("a", MaxMessage), strings.Repeat("a", MaxMessage)},
		{"newlines", "back-off restarting\nfailed container\r\n", "back-off restarting failed container"},
		{"invalid UTF-8", "bad \xff byte", "bad  byte"},
		{"long, cut between runes", long, strings.TrimRight(long[:MaxMessage-len(Ellipsis)-1], " ") + Ellipsis},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := shorten(tc.in)
			if got != tc.want {
				t.Errorf("shorten(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if len(got) > MaxMessage || !utf8.ValidString(got) || strings.ContainsAny(got, "\r\n") {
				t.Errorf("shorten(%q) = %q: longer than %d bytes, invalid UTF-8 or several lines", tc.in, got, MaxMessage)
			}
		})
	}

	u := object(t, `
apiVersion: cache.example.com/v1
kind: Redis
metadata: {name: sessions, namespace: shop}
status: {conditions: [{type: Ready, status: "False", reason: Waiting}]}
`)
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	conds[0].(map[string]any)["message"] = "line one\n" + long
	if err := unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if got, msg := Of(u); got != InProgress || len(msg) > MaxMessage || !strings.HasPrefix(msg, "line one étape") {
		t.Errorf("Of = %s, %q; want InProgress and the condition's message, one line, cut", got, msg)
	}
}

func TestDigest(t *testing.T) {
	available := object(t, deploymentAvailable)

	// A status update that leaves the health as it is, as the deployment
	// controller makes when it refreshes a condition's lastUpdateTime.
	refreshed := available.DeepCopy()
	conds, _, _ := unstructured.NestedSlice(refreshed.Object, "status", "conditions")
	conds[1].(map[string]any)["lastUpdateTime"] = "2026-01-10T10:00:00Z"
	if err := unstructured.SetNestedSlice(refreshed.Object, conds, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if Digest(refreshed) != Digest(available) {
		t.Errorf("Digest changed on a status update that leaves the health as it is")
	}

	rolling := available.DeepCopy()
	if err := unstructured.SetNestedField(rolling.Object, int64(1), "status", "updatedReplicas"); err != nil {
		t.Fatal(err)
	}
	if Digest(rolling) == Digest(available) {
		t.Errorf("Digest did not change when the Deployment started rolling out")
	}
	fewer := rolling.DeepCopy()
	if err := unstructured.SetNestedField(fewer.Object, int64(2), "status", "updatedReplicas"); err != nil {
		t.Fatal(err)
	}
	if Digest(fewer) == Digest(rolling) {
		t.Errorf("Digest did not change with the message (Updated: 1/3 to 2/3)")
	}

	// Digest is FNV-1a over status, a zero byte and message.
	s, msg := Of(available)
	h := fnv.New64a()
	h.Write([]byte(string(s) + "\x00" + msg))
	if got, want := Digest(available), h.Sum64(); got != want {
		t.Errorf("Digest = %#x, want FNV-1a %#x", got, want)
	}

	if Digest(nil) == Digest(available) {
		t.Errorf("Digest(nil) equals an available Deployment's")
	}
}

// BenchmarkDigest measures Digest on an available Deployment, which is
// what the watch registry computes twice on each status update of one.
func BenchmarkDigest(b *testing.B) {
	u := object(b, deploymentAvailable)
	b.ReportAllocs()
	for b.Loop() {
		Digest(u)
	}
}

// BenchmarkDigestConfigMap measures Digest on an object without status.
func BenchmarkDigestConfigMap(b *testing.B) {
	u := object(b, `{apiVersion: v1, kind: ConfigMap, metadata: {name: settings, namespace: shop}, data: {mode: fast}}`)
	b.ReportAllocs()
	for b.Loop() {
		Digest(u)
	}
}

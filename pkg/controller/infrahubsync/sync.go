// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/infrahub"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// sync runs one pass of the sync of key. It returns an error to be retried
// with backoff; what a retry cannot fix is reported in status and returns
// nil, to wait for the next interval or a change of the sync.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName, trigger Trigger) (result, error) {
	hinted := c.takeHints(key, trigger)
	cached, err := c.syncs.InfrahubSyncs(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.forgetWebhook(key)
		return result{}, nil
	}
	if err != nil {
		return result{}, err
	}
	if cached.DeletionTimestamp != nil {
		// The garbage collector deletes the children, foreground or not.
		c.sources.drop(cached.UID)
		return result{}, nil
	}
	sync := cached.DeepCopy()
	st := newStatus(sync, c.clock.Now())
	if sync.Spec.Suspend {
		c.sources.drop(sync.UID)
		c.forgetWebhook(key)
		st.suspended()
		return result{}, c.writeStatus(ctx, sync, st)
	}
	next := result{requeueAfter: c.jittered(c.interval(sync))}

	src, err := c.source(ctx, sync, trigger == TriggerRequested)
	if err != nil {
		st.refused(err)
		if werr := c.writeStatus(ctx, sync, st); werr != nil {
			return next, werr
		}
		if isRefusal(err) {
			// Nothing a retry fixes: the next interval, or a change of
			// the sync or of its Secrets' rights, brings it back.
			return next, nil
		}
		return next, err
	}
	isrc := c.infrahubSource(sync)
	whKey := c.webhookKey(ctx, sync, trigger)
	defer func() { c.publish(sync, whKey, st) }()
	if trigger == TriggerWebhook && c.targeted(sync, hinted) && !c.pollDue(key, c.interval(sync)) {
		err := c.syncHinted(ctx, sync, isrc, src, hinted, st)
		if werr := c.writeStatus(ctx, sync, st); werr != nil {
			err = errors.Join(err, werr)
		}
		return next, err
	}
	if whKey != nil {
		c.polled(key)
	}
	callCtx, cancel := context.WithTimeout(ctx, apiTimeout+infrahub.DefaultTimeout)
	listed, err := src.Artifacts(callCtx, isrc)
	cancel()
	if err != nil {
		return c.infrahubFailed(ctx, sync, st, next, err)
	}
	if len(listed) > v1alpha1.MaxSyncArtifacts {
		st.tooMany(len(listed))
		return next, c.writeStatus(ctx, sync, st)
	}

	in := Input{Sync: sync, Listed: listed, Children: c.children(sync, listed), Previous: map[string]v1alpha1.SyncedArtifact{}}
	for _, a := range sync.Status.Artifacts {
		in.Previous[a.ID] = a
	}
	in.Intact = c.intact.check(in.Children)
	plan := Decide(in)
	if err := c.execute(ctx, sync, isrc, src, plan, st); err != nil {
		if werr := c.writeStatus(ctx, sync, st); werr != nil {
			err = errors.Join(err, werr)
		}
		var ie *infrahub.Error
		if errors.As(err, &ie) {
			next.retryAfter = ie.RetryAfter
		}
		return next, err
	}
	return next, c.writeStatus(ctx, sync, st)
}

// isRefusal reports whether err is a sync Vidra refuses to act on as it
// is, for which a retry does not help.
func isRefusal(err error) bool {
	var r *refusal
	return isCredentialsError(err) || errors.As(err, &r)
}

// refusal is a sync that may not contact Infrahub as it is.
type refusal struct {
	reason, msg string
}

func (r *refusal) Error() string { return r.msg }

// infrahubSource is what the sync asks Infrahub for.
func (c *Controller) infrahubSource(sync *v1alpha1.InfrahubSync) infrahub.Source {
	s := sync.Spec.Source
	q := sync.Spec.QueryName
	if q == "" {
		q = c.config().QueryName
	}
	branch := s.TargetBranch
	if branch == "" {
		branch = "main"
	}
	return infrahub.Source{Branch: branch, At: s.TargetDate, QueryName: q, ArtifactName: s.ArtefactName, DefinitionName: s.DefinitionName}
}

// actingServiceAccount decides as whom a sync reads its Secrets and its
// children act: the template's ServiceAccount, else the operator's default
// one, else the operator itself in a trusted namespace only.
func (c *Controller) actingServiceAccount(sync *v1alpha1.InfrahubSync) (sa string, trusted bool, err error) {
	trusted = c.trusts(sync.Namespace)
	sa = sync.Spec.Template.ServiceAccountName
	if sa == "" {
		sa = c.opts.DefaultServiceAccount
	}
	if sa == "" && !trusted {
		return "", false, &refusal{reason: v1alpha1.ReasonServiceAccountRequired, msg: fmt.Sprintf(
			"namespace %s is not trusted to act as the operator (--trusted-namespaces): set spec.template.serviceAccountName to a ServiceAccount of %s that may get the credentials Secret and write what the artifacts declare; nothing was asked of Infrahub",
			sync.Namespace, sync.Namespace)}
	}
	return sa, trusted, nil
}

func (c *Controller) trusts(namespace string) bool {
	if len(c.opts.TrustedNamespaces) == 0 {
		return namespace == c.opts.Namespace
	}
	return slices.Contains(c.opts.TrustedNamespaces, "*") || slices.Contains(c.opts.TrustedNamespaces, namespace)
}

// source returns the sync's ArtifactSource: the one kept from earlier
// passes when the sync's source is unchanged, else one built from freshly
// read Secrets. reread forces the Secrets to be read again (a pass a
// person asked for), keeping the source if they are unchanged.
func (c *Controller) source(ctx context.Context, sync *v1alpha1.InfrahubSync, reread bool) (ArtifactSource, error) {
	sa, trusted, err := c.actingServiceAccount(sync)
	if err != nil {
		return nil, err
	}
	if !c.allowedURL(sync.Spec.Source.InfrahubAPIURL) {
		return nil, &refusal{reason: v1alpha1.ReasonInvalidSource, msg: fmt.Sprintf(
			"spec.source.infrahubAPIURL %s is not https://: plain http is allowed only with --allow-http-destinations, because credentials and artifacts would travel in clear text",
			sanitize(sync.Spec.Source.InfrahubAPIURL, 256))}
	}
	if at := sync.Spec.Source.TargetDate; at != "" {
		if err := infrahub.ValidateAt(at); err != nil {
			return nil, &refusal{reason: v1alpha1.ReasonInvalidSource, msg: fmt.Sprintf("spec.source.targetDate %q: %v", sanitize(at, 64), err)}
		}
	}
	src := sync.Spec.Source
	spec := fingerprint(src.InfrahubAPIURL, fmt.Sprint(src.CredentialsSecretRef), fmt.Sprint(src.CASecretRef), sa, fmt.Sprint(trusted))
	if !reread {
		if s, ok := c.sources.get(sync.UID, spec); ok {
			return s, nil
		}
	}
	req, err := c.readSource(ctx, sync, sa, trusted)
	if err != nil {
		// Credentials that cannot be read now must not keep working
		// through a source built from them earlier.
		c.sources.drop(sync.UID)
		return nil, err
	}
	built := fingerprint(req.URL, req.Credentials.Username, req.Credentials.Password, req.Credentials.Token, string(req.CAPEM))
	s, err := c.sources.put(sync.UID, spec, built, func() (ArtifactSource, error) { return c.factory(req) })
	if err != nil {
		return nil, &refusal{reason: v1alpha1.ReasonInvalidSource, msg: fmt.Sprintf("cannot use Infrahub at %s: %v", sanitize(req.URL, 256), err)}
	}
	return s, nil
}

// allowedURL is checked again by the client; here it turns a refusal into
// a condition before any Secret is read.
func (c *Controller) allowedURL(u string) bool {
	return c.opts.AllowHTTP || len(u) >= 8 && u[:8] == "https://"
}

// infrahubFailed reports a failed query: Ready False in Vidra's words,
// nothing applied removed, a retry with backoff (or at the interval, for
// what a retry does not fix).
func (c *Controller) infrahubFailed(ctx context.Context, sync *v1alpha1.InfrahubSync, st *status, next result, err error) (result, error) {
	var ie *infrahub.Error
	retry := true
	if errors.As(err, &ie) {
		next.retryAfter = ie.RetryAfter
		retry = ie.Retryable()
		if ie.Kind == infrahub.KindUnauthorized {
			// The Secret may have been rotated: read it again next pass.
			c.sources.forgetSpec(sync.UID)
			retry = true
		}
	}
	st.unavailable(err)
	if werr := c.writeStatus(ctx, sync, st); werr != nil {
		return next, werr
	}
	if !retry {
		klog.FromContext(ctx).V(2).Info("Infrahub refused the query; waiting for the next interval", "err", err)
		return next, nil
	}
	return next, err
}

// children are the VidraResources of the sync's namespace named after a
// listed artifact or labelled with the sync's name.
func (c *Controller) children(sync *v1alpha1.InfrahubSync, listed []infrahub.Artifact) map[string]*v1alpha1.VidraResource {
	out := map[string]*v1alpha1.VidraResource{}
	lister := c.resources.VidraResources(sync.Namespace)
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.SyncNameLabel: sync.Name})
	if vrs, err := lister.List(sel); err == nil {
		for _, vr := range vrs {
			out[vr.Name] = vr
		}
	}
	for _, a := range listed {
		if _, ok := out[a.ID]; ok || a.ID == "" {
			continue
		}
		if vr, err := lister.Get(a.ID); err == nil {
			out[a.ID] = vr
		}
	}
	return out
}

// execute does what plan says, recording each outcome in st. It goes on
// past a failed artifact, so that one bad artifact holds back no other,
// and returns the errors a retry may fix.
func (c *Controller) execute(ctx context.Context, sync *v1alpha1.InfrahubSync, isrc infrahub.Source, src ArtifactSource, plan Plan, st *status) error {
	logger := klog.FromContext(ctx)
	var errs []error
	for _, s := range plan.Skipped {
		st.skipped(s, c.lastChanged(sync, s.Artifact.ID))
	}
	for _, a := range plan.Current {
		st.current(a, c.lastChanged(sync, a.ID))
	}
	for _, r := range plan.Refresh {
		if err := c.write(ctx, sync, r.Artifact, r.Child.Spec.Manifest, r.Child); err != nil {
			errs = append(errs, err)
			st.failed(r.Artifact, err)
			continue
		}
		st.current(r.Artifact, c.lastChanged(sync, r.Artifact.ID))
	}
	for _, a := range plan.Fetch {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		callCtx, cancel := context.WithTimeout(ctx, apiTimeout+infrahub.DefaultTimeout)
		content, err := src.Download(callCtx, isrc, a.ID)
		cancel()
		if problem := contentProblem(a, content, err); problem != "" {
			c.metrics.Downloads.WithLabelValues("refused").Inc()
			kept := c.childOf(sync, a.ID) != nil
			st.skipped(Skip{Artifact: a, Problem: problem, Reason: v1alpha1.ReasonArtifactsNotApplied, Kept: kept}, c.lastChanged(sync, a.ID))
			continue
		}
		if err != nil {
			c.metrics.Downloads.WithLabelValues("error").Inc()
			st.unavailable(err)
			st.failed(a, err)
			errs = append(errs, err)
			continue
		}
		c.metrics.Downloads.WithLabelValues("applied").Inc()
		if a.Checksum == "" {
			a.Checksum = content.Checksum
		}
		if err := c.write(ctx, sync, a, string(content.Data), c.childOf(sync, a.ID)); err != nil {
			errs = append(errs, err)
			st.failed(a, err)
			continue
		}
		logger.V(2).Info("Applied artifact", "artifact", a.ID, "checksum", a.Checksum)
		st.changed(a)
	}
	for _, child := range plan.Delete {
		ctx, cancel := context.WithTimeout(ctx, apiTimeout)
		uid := child.UID
		c.expectDelete(uid)
		err := c.vidra.InfrahubV1alpha1().VidraResources(child.Namespace).Delete(ctx, child.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			c.deleted(uid)
			errs = append(errs, fmt.Errorf("delete VidraResource %s/%s: %w", child.Namespace, child.Name, err))
			continue
		}
		logger.Info("Deleted the VidraResource of an artifact Infrahub no longer lists", "vidraresource", child.Name)
		st.removed(child.Name)
	}
	return errors.Join(errs...)
}

// contentProblem says why downloaded content is not applied, or "" when
// it is usable (or the download failed for a reason a retry may fix).
func contentProblem(a infrahub.Artifact, content infrahub.Content, err error) string {
	var ie *infrahub.Error
	if errors.As(err, &ie) && ie.Kind == infrahub.KindTooLarge {
		return fmt.Sprintf(ContentProblemPrefix+" is larger than the %d bytes a VidraResource's manifest may hold here; not applied", ie.Limit)
	}
	if err != nil {
		return ""
	}
	ct := content.ContentType
	if ct == "" {
		ct = a.ContentType
	}
	if ct != "" && !UsableContentType(ct) {
		return unusableContentType(ct)
	}
	if len(content.Data) == 0 {
		return ContentProblemPrefix + " is empty; not applied (an empty manifest would prune everything)"
	}
	if !utf8.Valid(content.Data) {
		return ContentProblemPrefix + " is not UTF-8 text; not applied"
	}
	return ""
}

func (c *Controller) childOf(sync *v1alpha1.InfrahubSync, name string) *v1alpha1.VidraResource {
	vr, err := c.resources.VidraResources(sync.Namespace).Get(name)
	if err != nil {
		return nil
	}
	return vr
}

// write creates the child of a, or updates cur (the sync's own) to hold
// manifest as the sync says.
func (c *Controller) write(ctx context.Context, sync *v1alpha1.InfrahubSync, a infrahub.Artifact, manifest string, cur *v1alpha1.VidraResource) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	want := Desired(sync, a, manifest)
	client := c.vidra.InfrahubV1alpha1().VidraResources(sync.Namespace)
	if cur == nil {
		_, err := client.Create(ctx, want, metav1.CreateOptions{FieldManager: v1alpha1.InfrahubSyncFieldManager})
		if err != nil {
			return fmt.Errorf("create VidraResource %s/%s: %w", sync.Namespace, a.ID, err)
		}
		return nil
	}
	// The cached child holds no manifest (the operator's cache keeps its
	// sum only) and carries the cache's own annotation: the update starts
	// from the stored resource, whose manifest a refresh keeps.
	live, err := client.Get(ctx, cur.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read VidraResource %s/%s: %w", sync.Namespace, a.ID, err)
	}
	if !Owns(sync, live) {
		return fmt.Errorf("VidraResource %s/%s is not this sync's", sync.Namespace, a.ID)
	}
	if manifest == "" {
		want = Desired(sync, a, live.Spec.Manifest)
	}
	up := live
	up.Spec = want.Spec
	if up.Labels == nil {
		up.Labels = map[string]string{}
	}
	maps.Copy(up.Labels, want.Labels)
	if up.Annotations == nil {
		up.Annotations = map[string]string{}
	}
	delete(up.Annotations, v1alpha1.ArtifactStorageIDAnnotation)
	maps.Copy(up.Annotations, want.Annotations)
	_, err = client.Update(ctx, up, metav1.UpdateOptions{FieldManager: v1alpha1.InfrahubSyncFieldManager})
	if err != nil {
		return fmt.Errorf("update VidraResource %s/%s: %w", sync.Namespace, a.ID, err)
	}
	return nil
}

// lastChanged is the time the status says the artifact's content last
// changed.
func (c *Controller) lastChanged(sync *v1alpha1.InfrahubSync, id string) *metav1.Time {
	for _, a := range sync.Status.Artifacts {
		if a.ID == id {
			return a.LastChanged
		}
	}
	return nil
}

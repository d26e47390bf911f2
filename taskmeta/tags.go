package taskmeta

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TagsOf reads the TES tags an anchor holds (AnnotationTags); none when it
// holds none or they do not decode.
func TagsOf(meta metav1.ObjectMeta) map[string]string {
	var tags map[string]string
	if s := meta.Annotations[AnnotationTags]; s != "" {
		_ = json.Unmarshal([]byte(s), &tags)
	}
	return tags
}

package cluster

// FateAnnotationPrefix begins the annotations with which a pod on a kwok
// node chooses its fate (stages/pod.yaml): fate.tesk.test/result, /delay,
// /exit-code, /message. A handler under test allows them on executor pods
// (EXECUTOR_POD_ANNOTATIONS), as an operator allows annotations of their
// own cluster's.
const FateAnnotationPrefix = "fate.tesk.test/"

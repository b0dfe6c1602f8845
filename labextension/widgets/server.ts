/** Requests the run grid makes of the Jupyter server (not of the kernel). */

// Interrupt this kernel through the server's REST API: the same request as the
// toolbar's interrupt button. The kernel thread is busy running the cell, so a
// widget message would only be read after the run.
export async function interruptKernel(kernelId: string) {
  const config = document.getElementById('jupyter-config-data');
  const page = config ? JSON.parse(config.textContent || '{}') : {};
  const base = (page.baseUrl || '/').replace(/\/?$/, '/');
  const headers: Record<string, string> = {};
  if (page.token) {
    headers.Authorization = `token ${page.token}`;
  }
  const xsrf = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
  if (xsrf) {
    headers['X-XSRFToken'] = decodeURIComponent(xsrf[1]);
  }
  const response = await fetch(
    `${base}api/kernels/${encodeURIComponent(kernelId)}/interrupt`,
    {
      method: 'POST',
      headers,
      credentials: 'same-origin'
    }
  );
  if (!response.ok) {
    throw new Error(`interrupt failed: HTTP ${response.status}`);
  }
}

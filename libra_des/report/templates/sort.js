
function sortBy(th){const t=th.closest('table'),i=[...th.parentNode.children].indexOf(th),
b=t.tBodies[0],d=th.dataset.dir==='asc'?-1:1;th.dataset.dir=d===1?'asc':'desc';
const v=r=>{const c=r.children[i],x=c.dataset.v??c.textContent,n=parseFloat(x);
return isNaN(n)?x:n};
[...b.rows].sort((p,q)=>{const a=v(p),c=v(q);return (a>c?1:a<c?-1:0)*d})
.forEach(r=>b.appendChild(r))}
window.addEventListener('load',()=>{const im=[...document.images];
document.body.dataset.imagesTotal=im.length;
document.body.dataset.imagesDecoded=im.filter(x=>x.complete&&x.naturalWidth>0).length});
